//! `directory_tree`'s JSON: the nested tree of a walk's entries, indented as the reference
//! server indents it, cut to what one reply carries. A cut tree holds the first entries in the
//! walk's pre-order, so every entry it holds sits under its own parent and the text stays JSON
//! that parses.

use super::reads::json_len;

/// One node of `directory_tree`'s JSON, its members in the order clients expect.
#[derive(serde::Serialize)]
struct Node {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<Vec<Node>>,
}

/// The tree's indented JSON holding as many of `entries` (relative paths and whether each is
/// a directory, in depth-first pre-order) as fit in `room` bytes of a JSON string, and how many
/// it holds.
pub(crate) fn text(entries: &[(&str, bool)], room: usize) -> (String, usize) {
    let n = fitting(entries, room);
    (render(&entries[..n]), n)
}

/// How many of the first `entries` the tree's text holds within `room` bytes of a JSON string
/// (at least none), counted as [`render`] writes them and the reply escapes them: lines
/// indented two spaces a nesting, `\n` and `"` taking two bytes each.
fn fitting(entries: &[(&str, bool)], room: usize) -> usize {
    // The string's quotes and the top array's brackets.
    let mut size = 4;
    // The open directories, as `build` nests them, and whether each has a child yet.
    let mut open: Vec<(&str, bool)> = Vec::new();
    let mut top_has_child = false;
    for (i, (rel, is_dir)) in entries.iter().enumerate() {
        while let Some((dir, _)) = open.last() {
            if is_inside(rel, dir) {
                break;
            }
            open.pop();
        }
        let level = open.len() + 1;
        let has_child = match open.last_mut() {
            Some((_, has)) => has,
            None => &mut top_has_child,
        };
        // A comma after the previous sibling; else the array opens on a line of its own and
        // closes on one indented as its member (the top array's without indentation).
        size += match (*has_child, level) {
            (true, _) => 1,
            (false, 1) => 2,
            (false, _) => 2 + 4 * (level - 1),
        };
        *has_child = true;
        size += node_size(rel, level, *is_dir);
        if size > room {
            return i;
        }
        if *is_dir {
            open.push((rel, false));
        }
    }
    entries.len()
}

/// Bytes of the node at `rel`, `level` deep (1 at the top), in the reply's string: `{`, its
/// name's and type's lines, a directory's empty `children`, and `}` with the newline after it.
fn node_size(rel: &str, level: usize, is_dir: bool) -> usize {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // The name as the tree's JSON writes it, escaped again in the reply's string.
    let name = json_len(&serde_json::to_string(name).expect("a string serializes")) - 2;
    // Each level nests an object and its `children` array: two indentations.
    let (indent, inner) = (4 * level - 2, 4 * level);
    let newline = 2;
    let open = indent + "{".len() + newline;
    let name_line = inner + r#"\"name\": "#.len() + name + ",".len() + newline;
    let close = indent + "}".len() + newline;
    let kind = if is_dir {
        let type_line = inner + r#"\"type\": \"directory\","#.len() + newline;
        type_line + inner + r#"\"children\": []"#.len() + newline
    } else {
        inner + r#"\"type\": \"file\""#.len() + newline
    };
    open + name_line + kind + close
}

/// `rel` lies below the directory `dir`.
fn is_inside(rel: &str, dir: &str) -> bool {
    rel.len() > dir.len() && rel.starts_with(dir) && rel.as_bytes()[dir.len()] == b'/'
}

fn render(entries: &[(&str, bool)]) -> String {
    let tree = build(entries.iter().copied());
    serde_json::to_string_pretty(&tree).expect("a tree of strings always serializes")
}

/// Builds the nested tree from walk entries in depth-first pre-order (`a`, `a/b`, `a/b/c`...).
fn build<'a>(entries: impl Iterator<Item = (&'a str, bool)>) -> Vec<Node> {
    // The open directories from the top: each one's relative path and its children so far.
    let mut stack: Vec<(String, Vec<Node>)> = vec![(String::new(), Vec::new())];
    let close = |stack: &mut Vec<(String, Vec<Node>)>| {
        let (_, children) = stack.pop().expect("a directory below the top is open");
        let parent = stack.last_mut().expect("the top stays open");
        if let Some(node) = parent.1.last_mut() {
            node.children = Some(children);
        }
    };
    for (rel, is_dir) in entries {
        // Close directories this entry is not inside.
        while stack.len() > 1 {
            if is_inside(rel, &stack.last().expect("checked").0) {
                break;
            }
            close(&mut stack);
        }
        let name = rel.rsplit('/').next().unwrap_or(rel).to_string();
        let node = Node {
            name,
            kind: if is_dir { "directory" } else { "file" },
            children: is_dir.then(Vec::new),
        };
        stack.last_mut().expect("the top stays open").1.push(node);
        if is_dir {
            stack.push((rel.to_string(), Vec::new()));
        }
    }
    while stack.len() > 1 {
        close(&mut stack);
    }
    stack.pop().map(|(_, top)| top).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trees_nest_preorder_entries() {
        let entries = [("a", true), ("a/b", false), ("a/c", true), ("d", false)];
        let (text, n) = text(&entries, usize::MAX);
        assert_eq!(n, 4);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            json!([
                { "name": "a", "type": "directory", "children": [
                    { "name": "b", "type": "file" },
                    { "name": "c", "type": "directory", "children": [] }
                ] },
                { "name": "d", "type": "file" }
            ])
        );
    }

    /// The size counted for every prefix is its text's, and a tree cut to any room is JSON
    /// that parses, holding the first entries, as many as the room takes.
    #[test]
    fn cut_trees_are_the_longest_prefixes_that_fit() {
        let mut owned: Vec<(String, bool)> = vec![("empty".to_string(), true)];
        for a in 0..4 {
            owned.push((format!("dir \"{a}\""), true));
            for b in 0..3 {
                owned.push((format!("dir \"{a}\"/sub{b}"), true));
                for c in 0..3 {
                    owned.push((format!("dir \"{a}\"/sub{b}/f\\{c}\n\u{1}é.txt"), false));
                }
            }
            owned.push((format!("dir \"{a}\"/empty"), true));
            owned.push((format!("file{a}"), false));
        }
        let entries: Vec<(&str, bool)> = owned.iter().map(|(p, d)| (p.as_str(), *d)).collect();
        let sizes: Vec<usize> = (0..=entries.len())
            .map(|n| json_len(&render(&entries[..n])))
            .collect();
        for (n, size) in sizes.iter().enumerate() {
            assert_eq!(fitting(&entries, *size), n, "{n}");
            if *size > 0 {
                assert_eq!(fitting(&entries, size - 1), n.saturating_sub(1), "{n}");
            }
        }
        let rooms = sizes.iter().flat_map(|s| [s - 1, *s, s + 1]);
        for room in (0..6).chain(rooms) {
            let (cut, n) = text(&entries, room);
            assert_eq!(cut, render(&entries[..n]));
            serde_json::from_str::<serde_json::Value>(&cut).unwrap();
            assert!(n == 0 || sizes[n] <= room, "{room}");
            assert!(n == entries.len() || sizes[n + 1] > room, "{room}");
        }
    }
}
