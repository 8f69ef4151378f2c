//! Message sizes on the command line: `8,1K,64K,1M` or a power-of-two
//! range between `--min` and `--max`, as the OSU benchmarks take them.

/// Largest message a benchmark may use (1 GiB): buffers are allocated up
/// front, and a window of them is in flight at once.
pub const MAX_SIZE: u64 = 1 << 30;

/// Parses one size: a whole number of bytes with an optional binary
/// suffix `K`, `M` or `G` (upper or lower case; `KiB`, `MiB`, `GiB` too).
///
/// Errors: empty text, a non-number, an unknown suffix, or a size above
/// [`MAX_SIZE`], each named in the message.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "{text:?} is not a size (expected bytes such as 8, 64K or 1M)"
        ));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => {
            return Err(format!(
                "{text:?}: unknown size suffix {suffix:?} (use K, M or G, powers of 1024)"
            ))
        }
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is too large"))?;
    match value.checked_mul(1 << shift) {
        Some(bytes) if bytes <= MAX_SIZE => Ok(bytes),
        _ => Err(format!("{text:?} is larger than the 1G limit")),
    }
}

/// Parses a comma-separated list of sizes, kept in the given order.
///
/// Errors: an empty list or any size [`parse_size`] rejects.
pub fn parse_list(text: &str) -> Result<Vec<u64>, String> {
    if text.trim().is_empty() {
        return Err("the size list is empty".into());
    }
    text.split(',').map(parse_size).collect()
}

/// Every power of two from `min` to `max` (both included), with `min`
/// itself first when it is not a power of two and `max` last likewise;
/// `min` 0 gives 0 and then 1, 2, 4, ...
///
/// Errors: `min` above `max`.
pub fn range(min: u64, max: u64) -> Result<Vec<u64>, String> {
    if min > max {
        return Err(format!("--min {min} is larger than --max {max}"));
    }
    let mut sizes = vec![min];
    let mut next = if min == 0 { 1 } else { min.next_power_of_two() };
    if next == min {
        next *= 2;
    }
    while next < max {
        sizes.push(next);
        next *= 2;
    }
    if max > min {
        sizes.push(max);
    }
    Ok(sizes)
}

/// A size for people: `8 B`, `64 KiB`, `1.5 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            return if bytes & (scale - 1) == 0 {
                format!("{} {unit}", bytes / scale)
            } else {
                format!("{:.1} {unit}", bytes as f64 / scale as f64)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 16 "), Ok(16));
    }

    #[test]
    fn bad_sizes_are_named() {
        for bad in ["", "K", "-1", "1.5M", "8X", "2G", "99999999999999999999"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        assert!(parse_list("8,,16").is_err());
        assert!(parse_list("").unwrap_err().contains("empty"));
    }

    #[test]
    fn lists_keep_their_order() {
        assert_eq!(parse_list("1M,8,1K"), Ok(vec![1 << 20, 8, 1024]));
    }

    #[test]
    fn ranges_are_powers_of_two_between_the_ends() {
        assert_eq!(range(1, 16), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(range(0, 4), Ok(vec![0, 1, 2, 4]));
        assert_eq!(range(3, 20), Ok(vec![3, 4, 8, 16, 20]));
        assert_eq!(range(8, 8), Ok(vec![8]));
        assert!(range(9, 8).unwrap_err().contains("--min 9"));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(8), "8 B");
        assert_eq!(human(1024), "1 KiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(16 << 20), "16 MiB");
    }
}
