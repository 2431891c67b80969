//! Patterns read as the reference server reads them: minimatch with `{ dot: true }`. Each
//! pattern becomes globs for the walk's matcher (globset), which already matches as minimatch
//! does for `*`, `**`, `?`, classes and backslash escapes; this file does the rest:
//!
//! - a leading `!` negates the pattern (`!(x)` too: minimatch reads it as "not `(x)`");
//! - a leading `#` is a comment: the pattern matches nothing;
//! - braces expand first, as brace-expansion does: `{a,b}`, `{1..3}`, `{a..c}`, nested; a
//!   brace without a comma or range (`br{ace}.js`) is literal;
//! - repeated slashes are one (`node_modules//**`), `**` within a segment is `*`;
//! - a pattern that ends in `/` matches nothing (no entry's relative path ends in one).
//!
//! Patterns with extended globs (`@(…)`, `+(…)`, `?(…)`, `*(…)`, `!(…)` after the start) or
//! POSIX classes (`[[:alpha:]]`), which globset has not, and negated ones, which a walk cannot
//! prune by, are matched here (`local.rs`) on the entries the walk lists.

mod local;

/// One pattern, ready for the matcher.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The pattern matches what none of `globs` matches.
    pub negated: bool,
    /// Globs, any of which matching is a match; empty: matches nothing. Literal braces and
    /// commas are escaped, so globset reads them as minimatch does.
    pub globs: Vec<String>,
    /// globset matches every glob as minimatch does (no extended glob, no POSIX class).
    pub walkable: bool,
}

impl Pattern {
    /// The globs as one glob for the walk (an alternation when there are several); `None`
    /// when the pattern is negated or matches nothing, which the walk cannot say.
    pub(crate) fn walk_glob(&self) -> Option<String> {
        if !self.walkable {
            return None;
        }
        match (self.negated, self.globs.as_slice()) {
            (true, _) | (_, []) => None,
            (false, [one]) => Some(one.clone()),
            (false, many) => Some(format!("{{{}}}", many.join(","))),
        }
    }

    /// A matcher of the pattern, negation and all, matching as minimatch does.
    pub(crate) fn matcher(&self) -> Matcher {
        Matcher {
            negated: self.negated,
            globs: self.globs.iter().map(|g| local::Glob::new(g)).collect(),
        }
    }
}

/// A compiled [`Pattern`].
pub(crate) struct Matcher {
    negated: bool,
    globs: Vec<local::Glob>,
}

impl Matcher {
    /// True when the pattern matches the relative path `rel`.
    pub(crate) fn is_match(&self, rel: &str) -> bool {
        self.globs.iter().any(|g| g.is_match(rel)) != self.negated
    }
}

/// Brace expansions past this many are refused (`{a,b}{c,d}...` multiplies).
const MAX_EXPANSIONS: usize = 1024;

/// Reads `pattern` as minimatch would.
///
/// # Errors
///
/// The message for a pattern using what globset cannot match, or expanding too far.
pub(crate) fn parse(pattern: &str) -> Result<Pattern, String> {
    if pattern.starts_with('#') {
        return Ok(Pattern {
            negated: false,
            globs: Vec::new(),
            walkable: true,
        });
    }
    let bangs = pattern.chars().take_while(|c| *c == '!').count();
    let rest = &pattern[bangs..];
    let mut globs = Vec::new();
    for expanded in expand(rest)? {
        let glob = tidy(&expanded);
        if !glob.ends_with('/') && !globs.contains(&glob) {
            globs.push(glob);
        }
    }
    Ok(Pattern {
        negated: bangs % 2 == 1,
        walkable: !needs_local(rest),
        globs,
    })
}

/// True when `pattern` has what globset cannot match: an extended glob, a POSIX class.
fn needs_local(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'@' | b'+' | b'?' | b'*' | b'!'
                if bytes.get(i + 1) == Some(&b'(') && pattern[i + 1..].contains(')') =>
            {
                return true;
            }
            b'[' if pattern[i..].contains("[:") => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// Repeated slashes collapsed, and `**` that is not a whole segment made `*`.
fn tidy(pattern: &str) -> String {
    let mut collapsed = String::with_capacity(pattern.len());
    for c in pattern.chars() {
        if c == '/' && collapsed.ends_with('/') {
            continue;
        }
        collapsed.push(c);
    }
    let segments: Vec<String> = collapsed
        .split('/')
        .map(|segment| {
            if segment == "**" {
                return segment.to_string();
            }
            let mut out = String::with_capacity(segment.len());
            let mut escaped = false;
            for c in segment.chars() {
                if c == '*' && !escaped && out.ends_with('*') && !out.ends_with("\\*") {
                    continue;
                }
                escaped = c == '\\' && !escaped;
                out.push(c);
            }
            out
        })
        .collect();
    segments.join("/")
}

/// Brace expansion, as the brace-expansion package minimatch uses does it; literal braces
/// that are left are escaped for globset.
fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    expand_into(pattern, &mut out)?;
    Ok(out)
}

fn expand_into(pattern: &str, out: &mut Vec<String>) -> Result<(), String> {
    let Some((open, close)) = first_group(pattern) else {
        out.push(escape_braces(pattern));
        return Ok(());
    };
    let (pre, body, post) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let items: Vec<String> = match split_top(body) {
        items if items.len() > 1 => items.into_iter().map(str::to_string).collect(),
        _ => match range(body) {
            Some(items) => items,
            None => {
                // Not a set: the braces are literal; expand what follows.
                let mut rest = Vec::new();
                expand_into(post, &mut rest)?;
                let literal = escape_braces(&pattern[..=close]);
                for r in rest {
                    out.push(format!("{literal}{r}"));
                }
                return Ok(());
            }
        },
    };
    for item in items {
        expand_into(&format!("{pre}{item}{post}"), out)?;
        if out.len() > MAX_EXPANSIONS {
            return Err(format!(
                "{pattern}: expands to more than {MAX_EXPANSIONS} patterns"
            ));
        }
    }
    Ok(())
}

/// The first `{` not escaped and its matching `}`.
fn first_group(pattern: &str) -> Option<(usize, usize)> {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'{' => {
                let mut depth = 0;
                let mut j = i;
                while j < bytes.len() {
                    match bytes[j] {
                        b'\\' => j += 1,
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some((i, j));
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                return None;
            }
            _ => i += 1,
        }
    }
    None
}

/// `body` split at its commas outside nested braces.
fn split_top(body: &str) -> Vec<&str> {
    let bytes = body.as_bytes();
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&body[start..]);
    parts
}

/// `1..3`, `3..1`, `a..e`, with an optional `..step`: the items, or `None` for no range.
fn range(body: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = body.split("..").collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let step: i64 = match parts.get(2) {
        Some(s) => s.parse::<i64>().ok()?.abs().max(1),
        None => 1,
    };
    let numbers = (parts[0].parse::<i64>(), parts[1].parse::<i64>());
    let (from, to, letters) = match numbers {
        (Ok(a), Ok(b)) => (a, b, false),
        _ => {
            let (a, b) = (single_char(parts[0])?, single_char(parts[1])?);
            (i64::from(a as u32), i64::from(b as u32), true)
        }
    };
    let count = (to - from).abs() / step + 1;
    if count > MAX_EXPANSIONS as i64 {
        return None;
    }
    let sign = if to >= from { 1 } else { -1 };
    // A bound written with a leading zero pads every number to the wider bound.
    let padded = |p: &str| {
        let digits = p.trim_start_matches('-');
        digits.len() > 1 && digits.starts_with('0')
    };
    let width = match !letters && (padded(parts[0]) || padded(parts[1])) {
        true => parts[0].len().max(parts[1].len()),
        false => 0,
    };
    Some(
        (0..count)
            .map(|k| from + sign * k * step)
            .map(|v| match letters {
                true => char::from_u32(v as u32)
                    .map(String::from)
                    .unwrap_or_default(),
                false => format!("{v:0width$}"),
            })
            .collect(),
    )
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// `{`, `}` and `,` escaped, so that globset takes them literally.
fn escape_braces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if matches!(c, '{' | '}' | ',') && !escaped {
            out.push('\\');
        }
        escaped = c == '\\' && !escaped;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globs(p: &str) -> Vec<String> {
        parse(p).unwrap().globs
    }

    #[test]
    fn braces_expand_as_brace_expansion_does() {
        assert_eq!(globs("{a,b}.js"), ["a.js", "b.js"]);
        assert_eq!(globs("a{1..3}"), ["a1", "a2", "a3"]);
        assert_eq!(globs("a{08..10}"), ["a08", "a09", "a10"]);
        assert_eq!(globs("a{1..5..2}"), ["a1", "a3", "a5"]);
        assert_eq!(globs("x{a..e..2}"), ["xa", "xc", "xe"]);
        assert_eq!(globs("x{a..c}"), ["xa", "xb", "xc"]);
        assert_eq!(globs("{a,{b,c}d}"), ["a", "bd", "cd"]);
        assert_eq!(globs("{,z}"), ["", "z"]);
        assert_eq!(globs("br{ace}.js"), [r"br\{ace\}.js"]);
        assert_eq!(globs("**/*.{js,ts}"), ["**/*.js", "**/*.ts"]);
        assert_eq!(globs(r"a\{b,c}"), [r"a\{b\,c\}"]);
    }

    #[test]
    fn negation_comments_slashes_and_stars() {
        let p = parse("!*.js").unwrap();
        assert_eq!(
            (p.negated, p.globs, p.walkable),
            (true, vec!["*.js".into()], true)
        );
        assert!(!parse("!!a").unwrap().negated);
        let p = parse("!(x)").unwrap();
        assert_eq!(
            (p.negated, p.globs, p.walkable),
            (true, vec!["(x)".into()], true)
        );
        assert!(globs("#a").is_empty());
        assert_eq!(globs("**/node_modules//**"), ["**/node_modules/**"]);
        assert!(globs("node_modules/").is_empty());
        assert_eq!(globs("a**c/***/**"), ["a*c/*/**"]);
        assert!(!parse("+(a|b)").unwrap().walkable);
        assert!(!parse("x/@(a|b)").unwrap().walkable);
        assert!(!parse("[[:alpha:]]").unwrap().walkable);
        assert!(parse("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}{s,t}{u,v}").is_err());
    }

    /// The globs compile and match like minimatch (each case checked against minimatch 10.2
    /// with `{ dot: true }`), as one matcher and as the walk's one glob.
    #[test]
    fn the_globs_match_like_minimatch() {
        let matches = |p: &str, path: &str| {
            let parsed = parse(p).unwrap();
            let found = parsed.matcher().is_match(path);
            if let Some(walk) = parsed.walk_glob() {
                let one = globset::GlobBuilder::new(&walk)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .unwrap()
                    .compile_matcher();
                assert_eq!(one.is_match(path), found, "{walk} on {path}");
            }
            found
        };
        let cases = [
            ("**/node_modules/**", "node_modules", false),
            ("**/node_modules//**", "node_modules/x", true),
            ("node_modules/", "node_modules", false),
            ("br{ace}.js", "br{ace}.js", true),
            ("br{ace}.js", "brace.js", false),
            ("a/**", "a", false),
            ("a**c", "abc", true),
            ("a**c", "a/bc", false),
            ("!*.js", "a.ts", true),
            ("!*.js", "a.js", false),
            ("!(x)", "y", true),
            ("!(x)", "(x)", false),
            ("*", ".git", true),
            ("**", "a/.git", true),
            ("*.js", "x/y.js", false),
            ("a/**/c", "a/c", true),
            ("x/{a,b/c}", "x/b/c", true),
            ("{*.js,x}", "a.js", true),
            ("{*.js,x}", "d/a.js", false),
            ("**/*.{js,ts}", "a/b.ts", true),
            ("#a", "#a", false),
            ("+(a|b).ts", "a.ts", true),
            ("+(a|b).ts", "ab.ts", true),
            ("+(a|b).ts", "c.ts", false),
            ("+(a|b).ts", ".ts", false),
            ("**/@(app|m).*", "src/app.js", true),
            ("**/@(app|m).*", "x.js", false),
            ("**/@(app|m).*", "app.js", true),
            ("[[:alpha:]].ts", "a.ts", true),
            ("[[:alpha:]].ts", "1.ts", false),
            ("a.!(js)", "a.ts", true),
            ("a.!(js)", "a.js", false),
            ("*(a|b)x", "x", true),
            ("*(a|b)x", "ababx", true),
            ("*(a|b)x", "cx", false),
            ("?(a|b)c", "c", true),
            ("?(a|b)c", "ac", true),
            ("?(a|b)c", "abc", false),
            ("x/!(node_modules)/y", "x/a/y", true),
            ("x/!(node_modules)/y", "x/node_modules/y", false),
            ("**/!(src)", "a", true),
            ("**/!(src)", "x/src", false),
            ("**/!(src)/**", "src/a", false),
            ("**/!(src)/**", "b/a", true),
            ("[!a]x", "bx", true),
            ("[!a]x", "ax", false),
            ("[a-c]", "b", true),
            ("[]]", "]", true),
            ("*.[jt]s", "a.ts", true),
            ("@(a|b)", "ab", false),
        ];
        for (p, path, expected) in cases {
            assert_eq!(matches(p, path), expected, "{p} on {path}");
        }
    }
}
