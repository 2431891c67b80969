//! The parsers for the sizes, durations and listen URLs the command line takes.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Parses a size in bytes: a whole number, optionally followed by a binary unit `K`, `M`, `G`
/// or `T` (also written `KB`/`KiB` and so on, any case; each is a power of 1024) or `B`.
/// `64M` is 67,108,864 bytes; `4096` and `4096B` are 4,096.
///
/// # Errors
///
/// `InvalidInput` for anything else (empty, negative, fractional, an unknown unit) and for a
/// size that does not fit in 64 bits.
pub fn parse_size(text: &str) -> io::Result<u64> {
    let bad = || {
        invalid(format!(
            "{text}: not a size: expected bytes with an optional K, M, G or T suffix, like 64M"
        ))
    };
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(bad());
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    number.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Parses a duration: a whole number of seconds (`30`), or a number with units as in `500ms`,
/// `10s`, `2m`, `1h 30m`.
///
/// # Errors
///
/// `InvalidInput` for anything else.
pub fn parse_duration(text: &str) -> io::Result<Duration> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let bad = || {
        invalid(format!(
            "{text}: not a duration: expected seconds or a number with a unit, like 500ms or 10s"
        ))
    };
    let parsed: jiff::SignedDuration = trimmed.parse().map_err(|_| bad())?;
    Duration::try_from(parsed).map_err(|_| bad())
}

/// Parses a listen URL of the form `ws://HOST:PORT` (HOST an IP address or `localhost`).
///
/// # Errors
///
/// `InvalidInput` for any other form.
pub(crate) fn parse_listen_url(url: &str) -> io::Result<SocketAddr> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{url}: expected a listen URL like ws://127.0.0.1:0"),
        )
    };
    let rest = url.strip_prefix("ws://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let rest = rest.replacen("localhost:", "127.0.0.1:", 1);
    rest.parse().map_err(|_| bad())
}

/// The address of `--admin-listen http://HOST:PORT`, for clap.
pub fn admin_listen(url: &str) -> Result<SocketAddr, String> {
    let bad = || format!("{url}: expected an address like http://127.0.0.1:9300");
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let rest = rest.replacen("localhost:", "127.0.0.1:", 1);
    rest.parse().map_err(|_| bad())
}

/// A size flag's value, for clap.
pub fn size(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// A duration flag's value, for clap.
pub fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// A client timeout: a duration that is not zero.
pub fn timeout(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        Duration::ZERO => Err("must be more than 0".to_string()),
        timeout => Ok(timeout),
    }
}

/// The client's message limit: from 4 KiB (an `initialize` reply fits) to 4 GiB.
pub fn message_size(text: &str) -> Result<usize, String> {
    let size = size(text)?;
    if !(4 << 10..=4 << 30).contains(&size) {
        return Err("must be from 4K to 4G".to_string());
    }
    usize::try_from(size).map_err(|_| "too large for this machine".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls() {
        assert_eq!(
            parse_listen_url("ws://127.0.0.1:0").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 0))
        );
        assert_eq!(
            parse_listen_url("ws://localhost:8080/").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 8080))
        );
        assert!(parse_listen_url("http://127.0.0.1:0").is_err());
        assert!(parse_listen_url("ws://127.0.0.1").is_err());
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        let cases = [
            ("0", 0),
            ("4096", 4096),
            ("4096B", 4096),
            ("512K", 512 << 10),
            ("512kib", 512 << 10),
            ("64M", 64 << 20),
            ("64MB", 64 << 20),
            ("1G", 1 << 30),
            (" 2g ", 2 << 30),
            ("3T", 3 << 40),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
        }
        for bad in [
            "",
            "M",
            "-1",
            "1.5G",
            "1 G",
            "12X",
            "1e6",
            "99999999999999999999",
            "16777216T",
        ] {
            let err = parse_size(bad).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(
                err.to_string().starts_with(&format!("{bad}: not a size")),
                "{err}"
            );
        }
    }

    #[test]
    fn sizes_and_durations_as_documented() {
        assert_eq!(parse_size("512K").unwrap(), 512 * 1024);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("1.5G").is_err());
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn client_limits_refuse_zero_and_the_extremes() {
        assert_eq!(timeout("2s"), Ok(Duration::from_secs(2)));
        assert!(timeout("0").is_err());
        assert_eq!(message_size("4K"), Ok(4096));
        assert!(message_size("1K").is_err());
        assert!(message_size("5G").is_err());
    }

    #[test]
    fn durations_take_seconds_or_units() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7_200));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        for bad in ["", "-1", "-5s", "10 parsecs", "s", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
