//! The line protocol between [`crate::TcpClient`] and [`crate::Server`].
//!
//! A connection carries requests from the client, each answered by exactly
//! one reply before the next request is read. Every message is one line of
//! UTF-8 ended by `\n` (no `\r`), at most [`MAX_LINE`] bytes with the `\n`;
//! fields are separated by one space. Keys and values follow the crate's
//! rules, so a key never holds a space and a value (the rest of its line,
//! spaces included, possibly empty) never holds a newline.
//!
//! | request                   | replies                 | meaning |
//! |---------------------------|-------------------------|---------|
//! | `PUT <key> <value>`       | `OK`                    | store, replacing any value |
//! | `GET <key>`               | `VALUE <value>`, `NONE` | read without waiting |
//! | `WAIT <key> <timeout_ms>` | `VALUE <value>`, `NONE` | the server answers once the key has a value, or `NONE` when the timeout (decimal milliseconds, at most [`MAX_WAIT_MS`]) has passed |
//! | `DEL <key> [<token>]`     | `OK`                    | remove; an absent key is fine. A server with the run's key requires the token ([`crate::seal::delete_token`]) |
//!
//! A server that has the run's key refuses (`ERR`) a `PUT` whose value
//! is not sealed with it ([`crate::seal`]) and a `DEL` without its token.
//!
//! Any request the server cannot accept (unknown verb, bad key or value,
//! line too long, not UTF-8) is answered `ERR <message>` and the server then
//! closes the connection: after a malformed line it cannot know where the
//! next request starts. A well-behaved client checks keys and values before
//! sending and never sees `ERR`.
//!
//! The codec ([`Request`], [`Reply`], [`read_line`]) is public for the fuzz
//! targets of `crates/tether-fuzz`; applications use [`crate::TcpClient`]
//! and [`crate::Server`].

use std::io::{self, BufRead, Read};

use crate::rules::{key_problem, value_problem};

/// The longest line either side accepts, `\n` included: a `PUT` of the
/// longest key and value fits with room to spare.
pub const MAX_LINE: usize = 70 * 1024;

/// The longest `WAIT` the server accepts; clients split longer waits.
pub const MAX_WAIT_MS: u64 = 3_600_000;

/// A client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    Put {
        key: &'a str,
        value: &'a str,
    },
    Get {
        key: &'a str,
    },
    Wait {
        key: &'a str,
        timeout_ms: u64,
    },
    Del {
        key: &'a str,
        token: Option<&'a str>,
    },
}

impl Request<'_> {
    /// The request as a line, `\n` included.
    pub fn encode(&self) -> String {
        match self {
            Request::Put { key, value } => format!("PUT {key} {value}\n"),
            Request::Get { key } => format!("GET {key}\n"),
            Request::Wait { key, timeout_ms } => format!("WAIT {key} {timeout_ms}\n"),
            Request::Del { key, token: None } => format!("DEL {key}\n"),
            Request::Del {
                key,
                token: Some(token),
            } => format!("DEL {key} {token}\n"),
        }
    }

    /// Parses a line without its `\n`; the error is the text of the `ERR`
    /// reply.
    pub fn parse(line: &str) -> Result<Request<'_>, String> {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let request = match verb {
            "PUT" => {
                let (key, value) = rest.split_once(' ').ok_or("PUT needs a key and a value")?;
                if let Some(problem) = value_problem(value) {
                    return Err(format!("invalid value: {problem}"));
                }
                Request::Put { key, value }
            }
            "GET" => Request::Get { key: rest },
            "WAIT" => {
                let (key, timeout) = rest
                    .split_once(' ')
                    .ok_or("WAIT needs a key and a timeout")?;
                let timeout_ms = timeout
                    .parse::<u64>()
                    .ok()
                    .filter(|&ms| ms <= MAX_WAIT_MS)
                    .ok_or_else(|| {
                        format!("WAIT timeout must be 0..={MAX_WAIT_MS} milliseconds")
                    })?;
                Request::Wait { key, timeout_ms }
            }
            "DEL" => match rest.split_once(' ') {
                Some((_, token))
                    if token.len() != 2 * tether_auth::TAG_LEN
                        || !token.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    return Err("a DEL token is 64 hexadecimal digits".into());
                }
                Some((key, token)) => Request::Del {
                    key,
                    token: Some(token),
                },
                None => Request::Del {
                    key: rest,
                    token: None,
                },
            },
            _ => return Err("unknown request (expected PUT, GET, WAIT or DEL)".into()),
        };
        match key_problem(request.key()) {
            Some(problem) => Err(format!("invalid key: {problem}")),
            None => Ok(request),
        }
    }

    fn key(&self) -> &str {
        match self {
            Request::Put { key, .. }
            | Request::Get { key }
            | Request::Wait { key, .. }
            | Request::Del { key, .. } => key,
        }
    }
}

/// The server's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Value(String),
    None,
    Err(String),
}

impl Reply {
    /// The reply as a line, `\n` included; newlines inside an error message
    /// are replaced so that the reply stays one line.
    pub fn encode(&self) -> String {
        match self {
            Reply::Ok => "OK\n".into(),
            Reply::Value(value) => format!("VALUE {value}\n"),
            Reply::None => "NONE\n".into(),
            Reply::Err(message) => format!("ERR {}\n", message.replace('\n', " ")),
        }
    }

    /// Parses a line without its `\n`; the error says what is wrong.
    pub fn parse(line: &str) -> Result<Reply, String> {
        match line.split_once(' ').unwrap_or((line, "")) {
            ("OK", "") => Ok(Reply::Ok),
            ("NONE", "") => Ok(Reply::None),
            ("VALUE", value) => Ok(Reply::Value(value.to_owned())),
            ("ERR", message) => Ok(Reply::Err(message.to_owned())),
            _ => Err(format!("unexpected reply {:?}", truncate(line, 80))),
        }
    }
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its `\n`.
    Text(String),
    /// The peer closed the connection before sending anything more.
    Closed,
    /// A line longer than [`MAX_LINE`], or cut short by the end of the stream.
    TooLong,
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Reads one line, never buffering more than [`MAX_LINE`] bytes of it.
///
/// Blocks until a whole line, the end of the stream or an error (including
/// the stream's read timeout) arrives.
pub fn read_line(reader: &mut impl BufRead) -> io::Result<Line> {
    let mut bytes = Vec::new();
    Read::take(reader, MAX_LINE as u64).read_until(b'\n', &mut bytes)?;
    if bytes.is_empty() {
        return Ok(Line::Closed);
    }
    if bytes.pop() != Some(b'\n') {
        return Ok(Line::TooLong);
    }
    Ok(String::from_utf8(bytes).map_or(Line::NotUtf8, Line::Text))
}

fn truncate(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(cut, _)| &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let requests = [
            Request::Put {
                key: "proc/sim/0",
                value: "127.0.0.1:5000 x",
            },
            Request::Put {
                key: "k",
                value: "",
            },
            Request::Get { key: "k" },
            Request::Wait {
                key: "a:b",
                timeout_ms: 1500,
            },
            Request::Del {
                key: "k",
                token: None,
            },
            Request::Del {
                key: "k",
                token: Some("00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff"),
            },
        ];
        for request in requests {
            let line = request.encode();
            let parsed = Request::parse(line.strip_suffix('\n').unwrap()).unwrap();
            assert_eq!(parsed, request);
        }
    }

    #[test]
    fn bad_requests_are_refused() {
        for line in [
            "",
            "HELLO",
            "PUT",
            "PUT k",
            "GET",
            "GET a b",
            "WAIT k",
            "WAIT k -1",
            "WAIT k 99999999999",
            "DEL bad key",
        ] {
            assert!(Request::parse(line).is_err(), "{line:?}");
        }
    }

    #[test]
    fn replies_round_trip() {
        for reply in [
            Reply::Ok,
            Reply::None,
            Reply::Value("v w".into()),
            Reply::Value(String::new()),
            Reply::Err("no".into()),
        ] {
            let line = reply.encode();
            assert_eq!(Reply::parse(line.strip_suffix('\n').unwrap()), Ok(reply));
        }
        assert!(Reply::parse("OK extra").is_err());
        assert!(Reply::parse("MAYBE").is_err());
    }

    #[test]
    fn lines_are_bounded() {
        let mut input = io::Cursor::new(b"GET a\n\xff\n".to_vec());
        assert_eq!(read_line(&mut input).unwrap(), Line::Text("GET a".into()));
        assert_eq!(read_line(&mut input).unwrap(), Line::NotUtf8);
        assert_eq!(read_line(&mut input).unwrap(), Line::Closed);
        let mut long = io::Cursor::new(vec![b'x'; MAX_LINE + 10]);
        assert_eq!(read_line(&mut long).unwrap(), Line::TooLong);
    }
}
