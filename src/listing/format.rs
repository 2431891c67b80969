//! How `ls -l` and `stat` show entries to people: modes as `rwxr-xr-x`, times as ls and stat
//! print them, every name and link text escaped.

use std::io::{self, Write};

use super::entry::Entry;
use crate::names::escape;

pub(super) fn print_entries(
    out: &mut impl Write,
    entries: &[Entry],
    long: bool,
    now: jiff::Timestamp,
) -> io::Result<()> {
    if !long {
        for e in entries {
            let suffix = match e.kind {
                "symlink" => "@",
                "directory" => "/",
                _ => "",
            };
            writeln!(out, "{}{suffix}", escape(&e.raw_name))?;
        }
        return Ok(());
    }
    let width = entries
        .iter()
        .map(|e| e.size.to_string().len())
        .max()
        .unwrap_or(1);
    for e in entries {
        let (kind, mode) = match (e.kind, e.target.as_deref()) {
            ("symlink", _) => ('l', 0o777),
            ("directory", _) => ('d', e.mode),
            ("file", _) => ('-', e.mode),
            _ => ('?', e.mode),
        };
        let size = match &e.target {
            Some(target) => target.len() as u64,
            None => e.size,
        };
        write!(
            out,
            "{kind}{} {size:>width$} {} {}",
            mode_string(mode),
            ls_time(e.modified_at_ms, now),
            escape(&e.raw_name)
        )?;
        if let Some(target) = &e.target {
            write!(out, " -> {}", escape(target.as_bytes()))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `rwxr-xr-x` with `s`/`S` and `t`/`T` as ls shows them.
pub fn mode_string(mode: u32) -> String {
    let bit = |mask: u32, c: char| if mode & mask != 0 { c } else { '-' };
    let special = |exec: u32, special: u32, lower: char, upper: char| match (
        mode & exec != 0,
        mode & special != 0,
    ) {
        (true, true) => lower,
        (false, true) => upper,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// The time column of `ls -l`: `Dec  1 05:44` within six months, `Dec  1  2025` otherwise.
fn ls_time(ms: i64, now: jiff::Timestamp) -> String {
    let Some(zoned) = zoned(ms) else {
        return format!("{:>12}", "-");
    };
    let six_months = jiff::SignedDuration::from_hours(24 * 182);
    let age = now.duration_since(zoned.timestamp());
    if age > six_months || age < -jiff::SignedDuration::from_hours(1) {
        zoned.strftime("%b %e  %Y").to_string()
    } else {
        zoned.strftime("%b %e %H:%M").to_string()
    }
}

fn zoned(ms: i64) -> Option<jiff::Zoned> {
    if ms == 0 {
        return None;
    }
    let timestamp = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(timestamp.to_zoned(jiff::tz::TimeZone::system()))
}

/// A full time for `stat`: `2026-12-01 05:44:18.123 +0000`.
fn stat_time(ms: i64) -> String {
    zoned(ms).map_or_else(
        || "-".to_string(),
        |z| z.strftime("%Y-%m-%d %H:%M:%S%.3f %z").to_string(),
    )
}

pub(super) fn print_stat(out: &mut impl Write, e: &Entry) -> io::Result<()> {
    let kind = match (e.kind, e.target_type) {
        ("file", _) => "regular file".to_string(),
        ("symlink", Some(target)) => format!("symbolic link to a {target}"),
        (kind, _) => kind.to_string(),
    };
    writeln!(out, "    Path: {}", escape(&e.raw_path))?;
    writeln!(out, "    Type: {kind}")?;
    if let Some(target) = &e.target {
        writeln!(out, "  Target: {}", escape(target.as_bytes()))?;
    }
    writeln!(
        out,
        "    Size: {} ({} bytes)",
        indicatif::HumanBytes(e.size),
        e.size
    )?;
    let type_char = match e.kind {
        "directory" => 'd',
        "file" => '-',
        "symlink" => 'l',
        _ => '?',
    };
    writeln!(
        out,
        "    Mode: {:04o} ({type_char}{})",
        e.mode,
        mode_string(e.mode)
    )?;
    writeln!(out, "Modified: {}", stat_time(e.modified_at_ms))?;
    writeln!(out, " Created: {}", stat_time(e.created_at_ms))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_like_ls() {
        assert_eq!(mode_string(0o755), "rwxr-xr-x");
        assert_eq!(mode_string(0o644), "rw-r--r--");
        assert_eq!(mode_string(0o4755), "rwsr-xr-x");
        assert_eq!(mode_string(0o1777), "rwxrwxrwt");
        assert_eq!(mode_string(0o2644), "rw-r-Sr--");
    }
}
