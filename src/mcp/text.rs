//! Text the tools produce: sizes, dates, line selections, file URLs, name ordering, and the
//! edits with their unified diff. Formats follow what clients of the reference filesystem
//! server already read.

use std::cmp::Ordering;
use std::fmt::Write as _;

use similar::{Algorithm, ChangeTag, TextDiff};

/// Lines of context around each change in a diff.
const DIFF_CONTEXT: usize = 4;

/// `1.50 KB`-style sizes: bytes below 1 KiB as `N B`, larger ones with two decimals (halves
/// rounded up) in the largest unit that keeps the number at least 1.
pub(crate) fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if bytes == 0 {
        return "0 B".to_string();
    }
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes} B");
    }
    // Hundredths, rounded half up, in integers: the quotient of a size by a power of two is
    // exact, so this is the decimal rounding of the exact value.
    let divisor = 1u128 << (10 * unit);
    let hundredths = (u128::from(bytes) * 200 + divisor) / (2 * divisor);
    format!(
        "{}.{:02} {}",
        hundredths / 100,
        hundredths % 100,
        UNITS[unit]
    )
}

/// A time in ms since the epoch as `Tue Dec 01 2026 05:43:56 GMT+0000 (Coordinated Universal
/// Time)`, always in UTC.
pub(crate) fn format_date(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let seconds = ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{} {} {day:02} {year:04} {:02}:{:02}:{:02} GMT+0000 (Coordinated Universal Time)",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Year, month (1-12) and day of the month of a day count since 1970-01-01 (proleptic
/// Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `\r\n` as `\n`.
pub(crate) fn normalize_line_endings(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The first `n` lines, joined by `\n` (a final newline is not a line of its own).
pub(crate) fn head(text: &str, n: usize) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() {
        return String::new();
    }
    body.split('\n').take(n).collect::<Vec<_>>().join("\n")
}

/// The last `n` pieces of the text split at `\n` (after `\r\n` became `\n`), joined by `\n`.
pub(crate) fn tail(text: &str, n: usize) -> String {
    if text.is_empty() {
        return String::new();
    }
    let text = normalize_line_endings(text);
    let pieces: Vec<&str> = text.split('\n').collect();
    pieces[pieces.len().saturating_sub(n)..].join("\n")
}

/// A `file://` URL for an absolute path, percent-encoding what a URL path cannot hold.
pub(crate) fn file_url(path: &str) -> String {
    let mut out = String::from("file://");
    for byte in path.bytes() {
        let keep = byte > b' '
            && byte < 0x7f
            && !matches!(
                byte,
                b'"' | b'#' | b'<' | b'>' | b'?' | b'`' | b'{' | b'}' | b'%' | b'\\'
            );
        if keep {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Orders names as people read them: letters without regard to case first, lowercase before
/// uppercase on a tie, then by code point.
pub(crate) fn compare_names(a: &str, b: &str) -> Ordering {
    let folded = |s: &str| s.chars().flat_map(char::to_lowercase).collect::<String>();
    folded(a)
        .cmp(&folded(b))
        .then_with(|| {
            // Lowercase first: invert the code-point order of differing letters.
            for (x, y) in a.chars().zip(b.chars()) {
                if x != y {
                    return y.cmp(&x);
                }
            }
            Ordering::Equal
        })
        .then_with(|| a.cmp(b))
}

/// Why an edit could not be applied.
pub(crate) struct EditNotFound(pub String);

/// Applies `edits` (old text, new text) to `content` in order: an exact occurrence of the old
/// text is replaced first; else the first run of lines equal to the old text's lines when
/// leading and trailing whitespace is ignored, re-indented like the lines it replaces.
pub(crate) fn apply_edits(
    content: &str,
    edits: &[(String, String)],
) -> Result<String, EditNotFound> {
    let mut modified = content.to_string();
    for (old, new) in edits {
        let old_n = normalize_line_endings(old);
        let new_n = normalize_line_endings(new);
        if modified.contains(&old_n) {
            modified = modified.replacen(&old_n, &new_n, 1);
            continue;
        }
        let old_lines: Vec<&str> = old_n.split('\n').collect();
        let mut lines: Vec<String> = modified.split('\n').map(str::to_string).collect();
        let found = (0..(lines.len() + 1).saturating_sub(old_lines.len())).find(|&i| {
            old_lines
                .iter()
                .zip(&lines[i..])
                .all(|(o, c)| o.trim() == c.trim())
        });
        let Some(i) = found else {
            return Err(EditNotFound(old.clone()));
        };
        let indent = leading_whitespace(&lines[i]).to_string();
        let replacement: Vec<String> = new_n
            .split('\n')
            .enumerate()
            .map(|(j, line)| {
                if j == 0 {
                    return format!("{indent}{}", line.trim_start());
                }
                let old_indent = old_lines.get(j).map_or("", |l| leading_whitespace(l));
                let new_indent = leading_whitespace(line);
                if !old_indent.is_empty() && !new_indent.is_empty() {
                    let extra = new_indent
                        .chars()
                        .count()
                        .saturating_sub(old_indent.chars().count());
                    format!("{indent}{}{}", " ".repeat(extra), line.trim_start())
                } else {
                    line.to_string()
                }
            })
            .collect();
        lines.splice(i..i + old_lines.len(), replacement);
        modified = lines.join("\n");
    }
    Ok(modified)
}

fn leading_whitespace(line: &str) -> &str {
    let end = line
        .char_indices()
        .find(|(_, c)| !c.is_whitespace())
        .map_or(line.len(), |(i, _)| i);
    &line[..end]
}

/// A unified diff of two texts for `name`, with `Index:` and `===` header lines, file headers
/// tagged `original` and `modified`, hunks with four lines of context, and `\ No newline at
/// end of file` after a last line without one.
pub(crate) fn unified_diff(name: &str, old: &str, new: &str) -> String {
    let old = normalize_line_endings(old);
    let new = normalize_line_endings(new);
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(&old, &new);
    // Runs of equal, removed and added lines (lines keep their newline), removals before
    // additions within one change.
    let mut runs: Vec<(ChangeTag, Vec<&str>)> = Vec::new();
    for change in diff.iter_all_changes() {
        let tag = change.tag();
        let line = change.value();
        match runs.last_mut() {
            Some((last, lines)) if *last == tag => lines.push(line),
            _ => runs.push((tag, vec![line])),
        }
    }
    for i in 1..runs.len() {
        if runs[i].0 == ChangeTag::Delete && runs[i - 1].0 == ChangeTag::Insert {
            runs.swap(i - 1, i);
        }
    }
    let mut out = format!(
        "Index: {name}\n===================================================================\n\
         --- {name}\toriginal\n+++ {name}\tmodified\n"
    );
    struct Hunk {
        old_start: usize,
        old_lines: usize,
        new_start: usize,
        new_lines: usize,
        lines: Vec<String>,
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    let mut current: Option<(usize, usize, Vec<String>)> = None;
    for (i, (tag, lines)) in runs.iter().enumerate() {
        match tag {
            ChangeTag::Delete | ChangeTag::Insert => {
                let (old_start, new_start, range) = current.get_or_insert_with(|| {
                    let before: Vec<String> = match i.checked_sub(1).map(|p| &runs[p]) {
                        Some((ChangeTag::Equal, prev)) => prev
                            [prev.len().saturating_sub(DIFF_CONTEXT)..]
                            .iter()
                            .map(|l| format!(" {l}"))
                            .collect(),
                        _ => Vec::new(),
                    };
                    (old_line - before.len(), new_line - before.len(), before)
                });
                let _ = (old_start, new_start);
                let sign = if *tag == ChangeTag::Insert { '+' } else { '-' };
                range.extend(lines.iter().map(|l| format!("{sign}{l}")));
                if *tag == ChangeTag::Insert {
                    new_line += lines.len();
                } else {
                    old_line += lines.len();
                }
            }
            ChangeTag::Equal => {
                if let Some((old_start, new_start, mut range)) = current.take() {
                    if lines.len() <= DIFF_CONTEXT * 2 && i + 1 < runs.len() {
                        range.extend(lines.iter().map(|l| format!(" {l}")));
                        current = Some((old_start, new_start, range));
                    } else {
                        let n = lines.len().min(DIFF_CONTEXT);
                        range.extend(lines[..n].iter().map(|l| format!(" {l}")));
                        hunks.push(Hunk {
                            old_start,
                            old_lines: old_line - old_start + n,
                            new_start,
                            new_lines: new_line - new_start + n,
                            lines: range,
                        });
                    }
                }
                old_line += lines.len();
                new_line += lines.len();
            }
        }
    }
    if let Some((old_start, new_start, range)) = current.take() {
        hunks.push(Hunk {
            old_start,
            old_lines: old_line - old_start,
            new_start,
            new_lines: new_line - new_start,
            lines: range,
        });
    }
    for hunk in hunks {
        let old_start = hunk.old_start - usize::from(hunk.old_lines == 0);
        let new_start = hunk.new_start - usize::from(hunk.new_lines == 0);
        let _ = writeln!(
            out,
            "@@ -{old_start},{} +{new_start},{} @@",
            hunk.old_lines, hunk.new_lines
        );
        for line in hunk.lines {
            match line.strip_suffix('\n') {
                Some(line) => {
                    out.push_str(line);
                    out.push('\n');
                }
                None => {
                    out.push_str(&line);
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_half_up_in_the_largest_unit() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.00 KB");
        assert_eq!(format_size(1152), "1.13 KB");
        assert_eq!(format_size(5 * 1024 * 1024), "5.00 MB");
    }

    #[test]
    fn dates_are_utc_in_the_long_form() {
        assert_eq!(
            format_date(0),
            "Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)"
        );
        assert_eq!(
            format_date(1_796_104_800_000),
            "Tue Dec 01 2026 06:00:00 GMT+0000 (Coordinated Universal Time)"
        );
    }

    #[test]
    fn head_and_tail_count_lines() {
        assert_eq!(head("a\nb\nc\n", 2), "a\nb");
        assert_eq!(head("a\nb", 5), "a\nb");
        assert_eq!(tail("a\r\nb\nc\n", 2), "c\n");
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
    }

    #[test]
    fn edits_match_exactly_then_by_trimmed_lines() {
        let edits = [("b".to_string(), "B".to_string())];
        assert_eq!(apply_edits("a\nb\n", &edits).ok().unwrap(), "a\nB\n");
        let edits = [("x()\n  y()".to_string(), "z()".to_string())];
        assert_eq!(
            apply_edits("    x()\n    y()\n", &edits).ok().unwrap(),
            "    z()\n"
        );
        assert!(apply_edits("a", &[("q".into(), "r".into())]).is_err());
    }

    #[test]
    fn diffs_have_headers_context_and_the_missing_newline_marker() {
        let d = unified_diff("/f", "a\nb\nc", "a\nB\nc");
        assert_eq!(
            d,
            "Index: /f\n===================================================================\n\
             --- /f\toriginal\n+++ /f\tmodified\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\
             \\ No newline at end of file\n"
        );
    }

    #[test]
    fn file_urls_encode_what_a_path_cannot_hold() {
        assert_eq!(file_url("/a b/c#d"), "file:///a%20b/c%23d");
    }
}
