//! minimatch's matching, for what globset cannot say (extended globs, POSIX classes) and for
//! every pattern matched here rather than in the walk: a path matches segment by segment, `**`
//! as a whole segment matching any number of them (at least one at the end: `a/**` does not
//! match `a`), every other segment matched on its characters.

/// One pattern, split into segments.
#[derive(Debug)]
pub(crate) struct Glob {
    segments: Vec<Segment>,
}

#[derive(Debug)]
enum Segment {
    Globstar,
    Tokens(Vec<Tok>),
}

#[derive(Debug, Clone)]
enum Tok {
    Lit(char),
    Any,
    Star,
    Class {
        negated: bool,
        items: Vec<Item>,
    },
    /// `@(…)`, `?(…)`, `+(…)`, `*(…)`, `!(…)`: the kind and the alternatives.
    Group(char, Vec<Vec<Tok>>),
}

#[derive(Debug, Clone)]
enum Item {
    One(char),
    Range(char, char),
    Posix(fn(char) -> bool),
}

impl Glob {
    /// Parses one pattern (braces already expanded, slashes already single).
    pub(crate) fn new(pattern: &str) -> Self {
        let segments = pattern
            .split('/')
            .map(|s| match s {
                "**" => Segment::Globstar,
                _ => Segment::Tokens(parse(&s.chars().collect::<Vec<_>>())),
            })
            .collect();
        Self { segments }
    }

    /// True when the relative path `rel` matches.
    pub(crate) fn is_match(&self, rel: &str) -> bool {
        let parts: Vec<Vec<char>> = rel.split('/').map(|p| p.chars().collect()).collect();
        path_matches(&self.segments, &parts)
    }
}

fn path_matches(segments: &[Segment], parts: &[Vec<char>]) -> bool {
    match segments.split_first() {
        None => parts.is_empty(),
        Some((Segment::Globstar, [])) => !parts.is_empty(),
        Some((Segment::Globstar, rest)) => {
            (0..=parts.len()).any(|k| path_matches(rest, &parts[k..]))
        }
        Some((Segment::Tokens(toks), rest)) => {
            !parts.is_empty() && matches(toks, &parts[0]) && path_matches(rest, &parts[1..])
        }
    }
}

fn alt_matches(alts: &[Vec<Tok>], s: &[char]) -> bool {
    alts.iter().any(|a| matches(a, s))
}

fn matches(toks: &[Tok], s: &[char]) -> bool {
    let Some((tok, rest)) = toks.split_first() else {
        return s.is_empty();
    };
    match tok {
        Tok::Lit(c) => s.first() == Some(c) && matches(rest, &s[1..]),
        Tok::Any => !s.is_empty() && matches(rest, &s[1..]),
        Tok::Class { negated, items } => {
            !s.is_empty() && class_matches(items, s[0]) != *negated && matches(rest, &s[1..])
        }
        Tok::Star => (0..=s.len()).any(|k| matches(rest, &s[k..])),
        Tok::Group(kind, alts) => match kind {
            '@' => (0..=s.len()).any(|k| alt_matches(alts, &s[..k]) && matches(rest, &s[k..])),
            '?' => {
                matches(rest, s)
                    || (0..=s.len()).any(|k| alt_matches(alts, &s[..k]) && matches(rest, &s[k..]))
            }
            // One or more (`+`), zero or more (`*`): after one non-empty match, this same
            // group again or the rest.
            '+' | '*' => {
                (*kind == '*' && matches(rest, s))
                    || (1..=s.len()).any(|k| {
                        alt_matches(alts, &s[..k])
                            && (matches(rest, &s[k..])
                                || matches(&toks_again(kind, alts, rest), &s[k..]))
                    })
            }
            _ => (0..=s.len()).any(|k| !alt_matches(alts, &s[..k]) && matches(rest, &s[k..])),
        },
    }
}

/// `*(alts)` followed by `rest`: what may follow a first match of a repeated group.
fn toks_again(_kind: &char, alts: &[Vec<Tok>], rest: &[Tok]) -> Vec<Tok> {
    let mut again = vec![Tok::Group('*', alts.to_vec())];
    again.extend_from_slice(rest);
    again
}

fn class_matches(items: &[Item], c: char) -> bool {
    items.iter().any(|item| match item {
        Item::One(x) => *x == c,
        Item::Range(a, b) => (*a..=*b).contains(&c),
        Item::Posix(f) => f(c),
    })
}

fn posix(name: &str) -> Option<fn(char) -> bool> {
    Some(match name {
        "alpha" => |c: char| c.is_alphabetic(),
        "digit" => |c: char| c.is_ascii_digit(),
        "alnum" => |c: char| c.is_alphanumeric(),
        "upper" => |c: char| c.is_uppercase(),
        "lower" => |c: char| c.is_lowercase(),
        "space" => |c: char| c.is_whitespace(),
        "xdigit" => |c: char| c.is_ascii_hexdigit(),
        "punct" => |c: char| c.is_ascii_punctuation(),
        "blank" => |c: char| c == ' ' || c == '\t',
        "cntrl" => |c: char| c.is_control(),
        "graph" => |c: char| c.is_ascii_graphic(),
        "print" => |c: char| c.is_ascii_graphic() || c == ' ',
        "word" => |c: char| c.is_alphanumeric() || c == '_',
        _ => return None,
    })
}

/// The tokens of one segment; an unclosed `[` or group is literal.
fn parse(s: &[char]) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let group = matches!(c, '@' | '?' | '+' | '*' | '!') && s.get(i + 1) == Some(&'(');
        if group && let Some((alts, end)) = parse_group(s, i + 2) {
            toks.push(Tok::Group(c, alts));
            i = end;
            continue;
        }
        match c {
            '\\' if i + 1 < s.len() => {
                toks.push(Tok::Lit(s[i + 1]));
                i += 2;
                continue;
            }
            '*' => {
                if !matches!(toks.last(), Some(Tok::Star)) {
                    toks.push(Tok::Star);
                }
            }
            '?' => toks.push(Tok::Any),
            '[' => {
                if let Some((tok, end)) = parse_class(s, i + 1) {
                    toks.push(tok);
                    i = end;
                    continue;
                }
                toks.push(Tok::Lit('['));
            }
            c => toks.push(Tok::Lit(c)),
        }
        i += 1;
    }
    toks
}

/// The alternatives of a group whose body starts at `start`, and the index after its `)`.
fn parse_group(s: &[char], start: usize) -> Option<(Vec<Vec<Tok>>, usize)> {
    let (mut depth, mut i, mut from) = (0, start, start);
    let mut alts = Vec::new();
    while i < s.len() {
        match s[i] {
            '\\' => i += 1,
            '(' => depth += 1,
            '|' if depth == 0 => {
                alts.push(parse(&s[from..i]));
                from = i + 1;
            }
            ')' if depth == 0 => {
                alts.push(parse(&s[from..i]));
                return Some((alts, i + 1));
            }
            ')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// A class whose body starts at `start`, and the index after its `]`.
fn parse_class(s: &[char], start: usize) -> Option<(Tok, usize)> {
    let mut i = start;
    let negated = matches!(s.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let first = i;
    while i < s.len() {
        let c = s[i];
        if c == ']' && i > first {
            return Some((Tok::Class { negated, items }, i + 1));
        }
        if c == '[' && s.get(i + 1) == Some(&':') {
            let rest: String = s[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]")
                && let Some(f) = posix(&rest[..end])
            {
                items.push(Item::Posix(f));
                i += 2 + rest[..end].chars().count() + 2;
                continue;
            }
        }
        let c = if c == '\\' && i + 1 < s.len() {
            i += 1;
            s[i]
        } else {
            c
        };
        if s.get(i + 1) == Some(&'-') && s.get(i + 2).is_some_and(|e| *e != ']') {
            items.push(Item::Range(c, s[i + 2]));
            i += 3;
            continue;
        }
        items.push(Item::One(c));
        i += 1;
    }
    None
}
