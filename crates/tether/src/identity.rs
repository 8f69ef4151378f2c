//! Who this process is: its program's name, its rank and the number of
//! joining processes of its program, from the environment (DESIGN 3.9).

use crate::error::{err, ErrorClass, Result};

/// This process's place in its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub program: String,
    pub rank: u32,
    pub size: u32,
}

/// Rank and size variables, in order of precedence: Tether's own, then the
/// MPI launchers', Slurm's last (it is wrong under salloc + mpirun).
const RANK_SOURCES: &[(&str, &str)] = &[
    ("TETHER_RANK", "TETHER_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMIX_RANK", "PMIX_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

/// Checks a program name: 1 to 64 characters of `[A-Za-z0-9_.-]`.
pub fn check_program_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(err(
            ErrorClass::Init,
            format!(
                "program name {name:?} is not valid: use 1 to 64 characters of A-Z a-z 0-9 _ . -"
            ),
        ))
    }
}

/// Checks an explicit identity.
pub fn explicit(program: &str, rank: i64, size: i64) -> Result<Identity> {
    check_program_name(program)?;
    if size < 1 || size > i64::from(u32::MAX) {
        return Err(err(
            ErrorClass::Init,
            format!("program size {size} must be at least 1"),
        ));
    }
    if rank < 0 || rank >= size {
        return Err(err(
            ErrorClass::Init,
            format!("rank {rank} is outside program {program:?} of {size} joining processes"),
        ));
    }
    Ok(Identity {
        program: program.to_string(),
        rank: rank as u32,
        size: size as u32,
    })
}

/// The identity from the environment: `program` is `TETHER_PROGRAM`; rank
/// and size from the first pair of `RANK_SOURCES` whose rank is set; a
/// process with none of them is rank 0 of 1.
pub fn from_env(program: Option<&str>, var: impl Fn(&str) -> Option<String>) -> Result<Identity> {
    let program = program.ok_or_else(|| {
        err(
            ErrorClass::Init,
            "no program name: set TETHER_PROGRAM, start under `tether run --name NAME`, or call tether_init_as",
        )
    })?;
    for (rank_var, size_var) in RANK_SOURCES {
        let Some(rank) = var(rank_var) else { continue };
        let size = var(size_var).ok_or_else(|| {
            err(
                ErrorClass::Init,
                format!(
                    "{rank_var} is set but {size_var} is not: cannot tell the size of program {program:?} \
                     (set TETHER_RANK and TETHER_SIZE)"
                ),
            )
        })?;
        let parse = |name: &str, value: &str| {
            value.trim().parse::<i64>().map_err(|_| {
                err(
                    ErrorClass::Init,
                    format!("{name}={value:?} is not a whole number"),
                )
            })
        };
        return explicit(program, parse(rank_var, &rank)?, parse(size_var, &size)?);
    }
    explicit(program, 0, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn precedence_follows_the_design() {
        let e = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
        ]);
        assert_eq!(
            from_env(Some("sim"), e).unwrap(),
            Identity {
                program: "sim".into(),
                rank: 1,
                size: 2
            }
        );
        let e = env(&[
            ("TETHER_RANK", "0"),
            ("TETHER_SIZE", "3"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ]);
        assert_eq!(from_env(Some("sim"), e).unwrap().size, 3);
        assert_eq!(
            from_env(Some("solo"), env(&[])).unwrap(),
            Identity {
                program: "solo".into(),
                rank: 0,
                size: 1
            }
        );
    }

    /// What the MPI launchers set, as seen here: `mpirun.openmpi -n 2`
    /// (Open MPI 4.1.4, whose ranks also get PMIx's `PMIX_RANK` but no
    /// size) and MPICH 4.0.2's hydra (`mpiexec.mpich -n 2`).
    #[test]
    fn mpi_launchers_environments_give_rank_and_size() {
        let open_mpi = env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("OMPI_UNIVERSE_SIZE", "2"),
            ("PMIX_RANK", "1"),
            ("PMIX_NAMESPACE", "912654337"),
        ]);
        let hydra = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("PMI_FD", "6")]);
        for e in [
            Box::new(open_mpi) as Box<dyn Fn(&str) -> Option<String>>,
            Box::new(hydra),
        ] {
            assert_eq!(
                from_env(Some("ml"), e).unwrap(),
                Identity {
                    program: "ml".into(),
                    rank: 1,
                    size: 2
                }
            );
        }
        // PMIx alone names no size: a clear error, not rank 1 of 1.
        let e = from_env(Some("ml"), env(&[("PMIX_RANK", "1")])).unwrap_err();
        assert!(e.message.contains("PMIX_SIZE"), "{}", e.message);
        assert!(e.message.contains("TETHER_SIZE"), "{}", e.message);
    }

    #[test]
    fn bad_identities_say_what_is_wrong() {
        assert!(from_env(None, env(&[]))
            .unwrap_err()
            .message
            .contains("TETHER_PROGRAM"));
        let e = from_env(Some("a"), env(&[("PMI_RANK", "1")])).unwrap_err();
        assert!(e.message.contains("PMI_SIZE"), "{}", e.message);
        assert!(explicit("a", 3, 3).is_err());
        assert!(explicit("has space", 0, 1).is_err());
    }
}
