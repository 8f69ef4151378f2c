//! Entries sealed with the run's key: a value is stored as
//! `<value> mac=<64 hex digits>`, the MAC binding the value to its key
//! name, so that an entry written without the key (or moved to another
//! name) is never believed. A forged entry reads as absent: the genuine
//! writer's entry replaces it, and a reader that waits for it keeps
//! waiting.

use tether_auth::{hex, unhex, Key, TAG_LEN};

const ENTRY: &str = "tether rendezvous entry v1";
const DELETE: &str = "tether rendezvous delete v1";
const MARK: &str = " mac=";

/// Bytes a seal adds to a value.
pub const SEAL_LEN: usize = MARK.len() + 2 * TAG_LEN;

/// `value` sealed for `name`.
pub fn seal(key: &Key, name: &str, value: &str) -> String {
    let tag = key.prove(ENTRY, &[name.as_bytes(), value.as_bytes()]);
    format!("{value}{MARK}{}", hex(&tag))
}

/// The value of a sealed entry stored under `name`, or `None` when its
/// seal is missing or does not check.
pub fn unseal<'a>(key: &Key, name: &str, stored: &'a str) -> Option<&'a str> {
    let (value, tag) = stored.rsplit_once(MARK)?;
    let tag = unhex(tag)?;
    key.check(ENTRY, &[name.as_bytes(), value.as_bytes()], &tag)
        .then_some(value)
}

/// Whether `stored` ends as a sealed value does (`mac=` and 64 hex
/// digits): what a process without a key finds when the others have one.
pub fn looks_sealed(stored: &str) -> bool {
    stored
        .rsplit_once(MARK)
        .is_some_and(|(_, tag)| tag.len() == 2 * TAG_LEN && unhex(tag).is_some())
}

/// What a client sends with `DEL name` to a server that has the key.
pub fn delete_token(key: &Key, name: &str) -> String {
    hex(&key.prove(DELETE, &[name.as_bytes()]))
}

/// Whether `token` is [`delete_token`] of `name`.
pub fn check_delete_token(key: &Key, name: &str, token: &str) -> bool {
    unhex(token).is_some_and(|tag| key.check(DELETE, &[name.as_bytes()], &tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> Key {
        Key::new(&[byte; 32], "test").unwrap()
    }

    #[test]
    fn a_sealed_entry_opens_under_its_name_with_its_key_only() {
        let sealed = seal(&key(1), "addr/sim/0", "tcp=127.0.0.1:5 pid=3");
        assert_eq!(sealed.len(), "tcp=127.0.0.1:5 pid=3".len() + SEAL_LEN);
        assert_eq!(
            unseal(&key(1), "addr/sim/0", &sealed),
            Some("tcp=127.0.0.1:5 pid=3")
        );
        assert_eq!(unseal(&key(2), "addr/sim/0", &sealed), None);
        assert_eq!(unseal(&key(1), "addr/sim/1", &sealed), None);
        assert_eq!(unseal(&key(1), "addr/sim/0", "tcp=127.0.0.1:5 pid=3"), None);
        let forged = sealed.replace("127.0.0.1:5", "10.0.0.9:5");
        assert_eq!(unseal(&key(1), "addr/sim/0", &forged), None);
        assert!(check_delete_token(
            &key(1),
            "k",
            &delete_token(&key(1), "k")
        ));
        assert!(!check_delete_token(
            &key(1),
            "j",
            &delete_token(&key(1), "k")
        ));
        assert!(!check_delete_token(&key(1), "k", "zz"));
    }
}
