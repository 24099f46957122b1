//! A shell command line cut into simple commands: words with their quoting
//! kept, redirection targets and heredoc bodies aside, subshell bounds
//! marked. Only as much of the shell as the write analysis needs.

/// One simple command: its words unquoted, the files it redirects output
/// to, and the body of a heredoc fed to it.
#[derive(Debug, Default)]
pub(super) struct Simple {
    pub(super) words: Vec<String>,
    pub(super) redirect_targets: Vec<String>,
    pub(super) heredoc: Option<String>,
}

#[derive(Debug, PartialEq)]
enum Piece {
    Word(String),
    Redirect(String),
    Separator,
    /// `(`: a subshell (or `$(`) starts; a `cd` inside stays inside.
    Open,
    /// `)`: it ends.
    Close,
}

/// A simple command, or the bounds of a subshell around some.
#[derive(Debug)]
pub(super) enum Item {
    Command(Simple),
    Open,
    Close,
}

/// Splits a command line into pieces at unquoted operators, keeping each
/// word's quoting for `shlex` to undo; heredoc bodies are returned aside.
fn lex(command: &str) -> (Vec<Piece>, Vec<String>) {
    let chars: Vec<char> = command.chars().collect();
    let mut pieces = Vec::new();
    let mut bodies = Vec::new();
    let mut word = String::new();
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut expect_delim: Option<bool> = None;
    let mut i = 0;
    let flush = |word: &mut String,
                 pieces: &mut Vec<Piece>,
                 expect: &mut Option<bool>,
                 pending: &mut Vec<(String, bool)>| {
        if !word.is_empty() {
            if let Some(strip) = expect.take() {
                let delim = shlex::split(word)
                    .and_then(|w| w.into_iter().next())
                    .unwrap_or_default();
                pending.push((delim, strip));
            }
            pieces.push(Piece::Word(std::mem::take(word)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                word.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    word.push(n);
                    i += 1;
                }
            }
            '\'' => {
                word.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    word.push('\'');
                }
            }
            '"' => {
                word.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        word.push(chars[i]);
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    word.push('"');
                }
            }
            '#' if word.is_empty() => {
                while i + 1 < chars.len() && chars[i + 1] != '\n' {
                    i += 1;
                }
            }
            ' ' | '\t' => flush(&mut word, &mut pieces, &mut expect_delim, &mut pending),
            '\n' | ';' | '|' | '&' | '(' | ')' => {
                if c == '&' && chars.get(i + 1) == Some(&'>') {
                    // `&>` / `&>>`: stdout and stderr to a file.
                    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                    i += 1;
                    let mut op = String::from("&>");
                    if chars.get(i + 1) == Some(&'>') {
                        op.push('>');
                        i += 1;
                    }
                    pieces.push(Piece::Redirect(op));
                } else {
                    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                    pieces.push(match c {
                        '(' => Piece::Open,
                        ')' => Piece::Close,
                        _ => Piece::Separator,
                    });
                    if c == '\n' {
                        // Heredoc bodies start on the next line.
                        for (delim, strip) in pending.drain(..) {
                            let mut body = String::new();
                            i += 1;
                            while i < chars.len() {
                                let end = chars[i..]
                                    .iter()
                                    .position(|&x| x == '\n')
                                    .map_or(chars.len(), |p| i + p);
                                let line: String = chars[i..end].iter().collect();
                                let cmp = if strip {
                                    line.trim_start_matches('\t')
                                } else {
                                    line.as_str()
                                };
                                i = end;
                                if cmp == delim {
                                    break;
                                }
                                body.push_str(&line);
                                body.push('\n');
                                i += 1;
                            }
                            bodies.push(body);
                        }
                        // The newline that ends a delimiter line ends the
                        // command line after it too.
                        pieces.push(Piece::Separator);
                    }
                }
            }
            '>' | '<' => {
                // A word of digits right before is a file descriptor number.
                if !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                }
                flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                let mut op = String::from(c);
                while let Some(&n) = chars.get(i + 1) {
                    if matches!(n, '>' | '<' | '|' | '&' | '-') && op.len() < 3 {
                        op.push(n);
                        i += 1;
                    } else {
                        break;
                    }
                }
                if op.starts_with("<<") && !op.starts_with("<<<") {
                    expect_delim = Some(op.ends_with('-'));
                }
                pieces.push(Piece::Redirect(op));
            }
            _ => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
    (pieces, bodies)
}

pub(super) fn simple_commands(command: &str) -> Option<Vec<Item>> {
    let (pieces, mut bodies) = lex(command);
    bodies.reverse();
    let mut out = Vec::new();
    let mut cur = Simple::default();
    let mut iter = pieces.into_iter().peekable();
    while let Some(piece) = iter.next() {
        match piece {
            Piece::Separator | Piece::Open | Piece::Close => {
                if !cur.words.is_empty() || !cur.redirect_targets.is_empty() {
                    out.push(Item::Command(std::mem::take(&mut cur)));
                }
                match piece {
                    Piece::Open => out.push(Item::Open),
                    Piece::Close => out.push(Item::Close),
                    _ => {}
                }
            }
            Piece::Word(raw) => cur.words.push(unquote(&raw)?),
            Piece::Redirect(op) => {
                let target = match iter.peek() {
                    Some(Piece::Word(_)) => match iter.next() {
                        Some(Piece::Word(w)) => unquote(&w)?,
                        _ => continue,
                    },
                    _ => continue,
                };
                // `>&word` sends stdout and stderr to a file unless the word
                // is a descriptor number or `-` (`2>&1`, `>&-`).
                let writes = matches!(op.as_str(), ">" | ">>" | ">|" | "&>" | "&>>" | "<>")
                    || (op == ">&" && !is_descriptor(&target));
                if op.starts_with("<<") && !op.starts_with("<<<") {
                    cur.heredoc = bodies.pop();
                }
                if writes {
                    cur.redirect_targets.push(target);
                }
            }
        }
    }
    if !cur.words.is_empty() || !cur.redirect_targets.is_empty() {
        out.push(Item::Command(cur));
    }
    Some(out)
}

/// A redirection word naming a file descriptor (`1`, `2`, `-`, `3-`)
/// rather than a file.
fn is_descriptor(word: &str) -> bool {
    let digits = word.strip_suffix('-').unwrap_or(word);
    word == "-" || (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
}

/// Removes one word's quoting with `shlex` (POSIX rules); `None` when the
/// quoting is unbalanced.
pub(super) fn unquote(raw: &str) -> Option<String> {
    let words = shlex::split(raw)?;
    Some(words.concat())
}
