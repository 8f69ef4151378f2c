//! The program segments of `tether run`, MPMD style:
//! `--name A -n 2 cmd args : --name B mpiexec -n 4 ./b`.

use std::collections::HashSet;

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
}

/// Why the segments cannot be used; the message is for a usage error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SegmentError(String);

/// Splits `tokens` at each `:` and parses every segment as
/// `--name NAME [-n N] [--] CMD [ARGS...]` (options in any order before the
/// command; `--name=NAME` and `-nN` also work).
///
/// Errors: an empty segment, a missing or repeated option, an unknown option
/// before the command, a missing command, an invalid name or rank count, or
/// a name used by two segments.
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
        return Err("is empty (expected --name NAME [-n N] COMMAND [ARGS...])".into());
    }
    let mut name = None;
    let mut ranks = None;
    let mut rest = tokens;
    while let Some((token, after)) = rest.split_first() {
        let token = token.as_str();
        let (option, inline) = match token.split_once('=') {
            Some((option @ "--name", value)) => (option, Some(value)),
            _ if token.starts_with("-n") && token.len() > 2 => ("-n", Some(&token[2..])),
            _ => (token, None),
        };
        let slot = match option {
            "--name" => &mut name,
            "-n" => &mut ranks,
            "--" => {
                rest = after;
                break;
            }
            _ if option.starts_with('-') => {
                return Err(format!(
                    "unknown option {option:?} (before the command only --name NAME and -n N are allowed)"
                ))
            }
            _ => break,
        };
        let (value, after) = match inline {
            Some(value) => (value, after),
            None => match after.split_first() {
                Some((value, after)) => (value.as_str(), after),
                None => return Err(format!("{option} needs a value")),
            },
        };
        if slot.replace(value).is_some() {
            return Err(format!("{option} is given twice"));
        }
        rest = after;
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
    })
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
        }
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
        ] {
            let message = parse(&tokens(line)).unwrap_err().to_string();
            assert!(message.contains(expected), "{line:?}: {message}");
        }
    }
}
