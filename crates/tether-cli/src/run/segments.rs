//! The program segments of `tether run`, MPMD style:
//! `--name A -n 2 --env K=V cmd args : --name B mpiexec -n 4 ./b`.

use std::collections::HashSet;

use super::environment::SET_PER_PROCESS;

/// Most ranks one segment may start.
pub const MAX_RANKS: u32 = 4096;
/// Longest program name.
pub const MAX_NAME_LEN: usize = 64;

const SEPARATOR: &str = ":";

/// One program of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The program name, unique in the run.
    pub name: String,
    /// `-n N`: start the command N times as ranks 0..N-1; `None`: start it
    /// once and let it start its own ranks.
    pub ranks: Option<u32>,
    /// The command and its arguments; never empty.
    pub command: Vec<String>,
    /// `--env K=V`, in the order given: set in this program's environment
    /// (as `mpirun -x K=V`); a later one of the same name wins.
    pub env: Vec<(String, String)>,
}

/// Why the segments cannot be used; the message is for a usage error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SegmentError(String);

/// Splits `tokens` at each `:` and parses every segment as
/// `--name NAME [-n N] [--env K=V]... [--] CMD [ARGS...]` (options in any
/// order before the command; `--name=NAME`, `-nN` and `--env=K=V` also
/// work).
///
/// Errors: an empty segment, a missing or repeated option (`--env` may
/// repeat), an unknown option before the command, a missing command, an
/// invalid name, rank count or `--env` value, or a name used by two
/// segments.
pub fn parse(tokens: &[String]) -> Result<Vec<Segment>, SegmentError> {
    let groups: Vec<&[String]> = tokens.split(|token| token == SEPARATOR).collect();
    let mut segments = Vec::with_capacity(groups.len());
    let mut names = HashSet::new();
    for (index, group) in groups.into_iter().enumerate() {
        let segment = parse_segment(group)
            .map_err(|message| SegmentError(format!("program segment {}: {message}", index + 1)))?;
        if !names.insert(segment.name.clone()) {
            return Err(SegmentError(format!(
                "program name {:?} is given to two segments; names must be unique",
                segment.name
            )));
        }
        segments.push(segment);
    }
    Ok(segments)
}

fn parse_segment(tokens: &[String]) -> Result<Segment, String> {
    if tokens.is_empty() {
        return Err(
            "is empty (expected --name NAME [-n N] [--env K=V]... COMMAND [ARGS...])".into(),
        );
    }
    let mut name = None;
    let mut ranks = None;
    let mut env = Vec::new();
    let mut rest = tokens;
    while let Some((token, after)) = rest.split_first() {
        let token = token.as_str();
        let (option, inline) = match token.split_once('=') {
            Some((option @ ("--name" | "--env"), value)) => (option, Some(value)),
            _ if token.starts_with("-n") && token.len() > 2 => ("-n", Some(&token[2..])),
            _ => (token, None),
        };
        match option {
            "--name" | "-n" | "--env" => {}
            "--" => {
                rest = after;
                break;
            }
            _ if option.starts_with('-') => {
                return Err(format!(
                    "unknown option {option:?} (before the command only --name NAME, -n N and --env K=V are allowed)"
                ))
            }
            _ => break,
        }
        let (value, after) = match inline {
            Some(value) => (value, after),
            None => match after.split_first() {
                Some((value, after)) => (value.as_str(), after),
                None => return Err(format!("{option} needs a value")),
            },
        };
        rest = after;
        let slot = match option {
            "--name" => &mut name,
            "-n" => &mut ranks,
            _ => {
                env.push(check_env(value)?);
                continue;
            }
        };
        if slot.replace(value).is_some() {
            return Err(format!("{option} is given twice"));
        }
    }
    let name = check_name(name.ok_or("--name NAME is missing")?)?;
    let ranks = ranks.map(check_ranks).transpose()?;
    if rest.is_empty() {
        return Err(format!("program {name:?} has no command"));
    }
    Ok(Segment {
        name,
        ranks,
        command: rest.to_vec(),
        env,
    })
}

/// `--env K=V`: a non-empty name without `=` or NUL, not one that `tether
/// run` sets itself; the value may be empty.
fn check_env(value: &str) -> Result<(String, String), String> {
    let Some((key, val)) = value.split_once('=') else {
        return Err(format!(
            "--env {value:?}: expected NAME=VALUE (the variables of the launcher's environment are passed on already)"
        ));
    };
    if key.is_empty() || key.contains('\0') || val.contains('\0') {
        return Err(format!(
            "--env {value:?}: the name must not be empty and neither part may contain NUL"
        ));
    }
    if SET_PER_PROCESS.contains(&key) {
        return Err(format!(
            "--env {key}: tether run sets {key} itself for each process ({})",
            SET_PER_PROCESS.join(", ")
        ));
    }
    Ok((key.to_owned(), val.to_owned()))
}

fn check_name(name: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(allowed) {
        return Err(format!(
            "invalid program name {name:?} (1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 _ - .)"
        ));
    }
    Ok(name.to_owned())
}

fn check_ranks(value: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_RANKS).contains(n))
        .ok_or_else(|| format!("-n {value:?}: expected a number of ranks from 1 to {MAX_RANKS}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn mpmd_segments() {
        let parsed = parse(&tokens(
            "--name A -n 2 cmd -x : -n3 --name=B cmd2 : --name C mpiexec -n 2 ./prog : --name D -- -dash",
        ))
        .unwrap();
        let expected = [
            ("A", Some(2), "cmd -x"),
            ("B", Some(3), "cmd2"),
            ("C", None, "mpiexec -n 2 ./prog"),
            ("D", None, "-dash"),
        ];
        assert_eq!(parsed.len(), expected.len());
        for (segment, (name, ranks, command)) in parsed.iter().zip(expected) {
            assert_eq!(segment.name, name);
            assert_eq!(segment.ranks, ranks);
            assert_eq!(segment.command, tokens(command));
            assert!(segment.env.is_empty());
        }
    }

    #[test]
    fn env_options_repeat_in_order() {
        let parsed = parse(&tokens(
            "--env A=1 --name X -n 2 --env=B=x=y --env C= --env A=2 cmd --env D=4 : --name Y cmd",
        ))
        .unwrap();
        let pairs: Vec<(&str, &str)> = parsed[0]
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(pairs, [("A", "1"), ("B", "x=y"), ("C", ""), ("A", "2")]);
        // After the command, --env is the command's own argument.
        assert_eq!(parsed[0].command, tokens("cmd --env D=4"));
        assert!(parsed[1].env.is_empty());
    }

    #[test]
    fn bad_segments_are_refused() {
        for (line, expected) in [
            ("--name A cmd :", "segment 2: is empty"),
            (": --name A cmd", "segment 1: is empty"),
            ("-n 2 cmd", "--name NAME is missing"),
            ("--name A", "has no command"),
            ("--name A -n 2", "has no command"),
            ("--name", "--name needs a value"),
            ("--name A --name B cmd", "--name is given twice"),
            ("--name A -x cmd", "unknown option \"-x\""),
            ("--name A -n 0 cmd", "from 1 to"),
            ("--name A -n two cmd", "from 1 to"),
            ("--name a,b cmd", "invalid program name"),
            ("--name A cmd : --name A cmd", "given to two segments"),
            ("--name A --env cmd", "--env \"cmd\": expected NAME=VALUE"),
            ("--name A --env =1 cmd", "the name must not be empty"),
            ("--name A --env", "--env needs a value"),
            (
                "--name A --env TETHER_RANK=3 cmd",
                "sets TETHER_RANK itself",
            ),
        ] {
            let message = parse(&tokens(line)).unwrap_err().to_string();
            assert!(message.contains(expected), "{line:?}: {message}");
        }
    }
}
