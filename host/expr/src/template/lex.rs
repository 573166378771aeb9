//! Template source in, tokens with byte positions out (Go `text/template` lexical rules:
//! `{{ }}` actions, `{{-`/`-}}` trim markers, `{{/* */}}` comments).

use super::error::ParseError;

/// One token. `pos` is the byte offset in the template source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// Literal text outside actions (already trimmed by neighbouring trim markers).
    Text(String),
    LeftDelim,
    RightDelim,
    /// `.` alone.
    Dot,
    /// `.name`; `chained` when it directly follows a value (`.a.b`, `$x.b`, `(...).b`) rather
    /// than starting a new operand after a space.
    Field {
        name: String,
        chained: bool,
    },
    /// `$` or `$name`.
    Variable(String),
    Ident(String),
    String(String),
    Number(String),
    Char(char),
    Pipe,
    LeftParen,
    RightParen,
    Declare,
    Assign,
    Comma,
    Eof,
}

/// Splits a template into tokens.
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer {
        src,
        pos: 0,
        tokens: Vec::new(),
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    tokens: Vec<Token>,
}

impl Lexer<'_> {
    fn run(&mut self) -> Result<(), ParseError> {
        let mut trim_next_text = false;
        loop {
            let rest = &self.src[self.pos..];
            let Some(open) = rest.find("{{") else {
                self.push_text(rest, trim_next_text, false, self.pos);
                self.tokens.push(Token {
                    kind: Tok::Eof,
                    pos: self.src.len(),
                });
                return Ok(());
            };
            let text = &rest[..open];
            let after = &rest[open + 2..];
            let trim_left = after.starts_with("- ") || after.starts_with("-\t") || after.starts_with("-\n");
            self.push_text(text, trim_next_text, trim_left, self.pos);
            let action_start = self.pos + open;
            self.pos = action_start + 2 + if trim_left { 2 } else { 0 };
            // Comments: {{/* ... */}} with optional trim markers around them.
            if self.src[self.pos..].starts_with("/*") {
                let Some(end) = self.src[self.pos..].find("*/") else {
                    return Err(ParseError::at(action_start, "unclosed comment"));
                };
                self.pos += end + 2;
                trim_next_text = self.close_action(action_start)?;
                continue;
            }
            self.tokens.push(Token {
                kind: Tok::LeftDelim,
                pos: action_start,
            });
            trim_next_text = self.lex_action(action_start)?;
        }
    }

    fn push_text(&mut self, text: &str, trim_start: bool, trim_end: bool, pos: usize) {
        let mut text = text;
        if trim_start {
            text = text.trim_start();
        }
        if trim_end {
            text = text.trim_end();
        }
        if !text.is_empty() {
            self.tokens.push(Token {
                kind: Tok::Text(text.to_string()),
                pos,
            });
        }
    }

    /// Consumes whitespace and the closing delimiter; returns whether it trims what follows.
    fn close_action(&mut self, action_start: usize) -> Result<bool, ParseError> {
        let rest = &self.src[self.pos..];
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
        if trimmed.starts_with("-}}") {
            self.pos += 3;
            return Ok(true);
        }
        if trimmed.starts_with("}}") {
            self.pos += 2;
            return Ok(false);
        }
        Err(ParseError::at(action_start, "unclosed action: missing }}"))
    }

    fn lex_action(&mut self, action_start: usize) -> Result<bool, ParseError> {
        let mut depth = 0usize;
        loop {
            let rest = &self.src[self.pos..];
            let Some(c) = rest.chars().next() else {
                return Err(ParseError::at(action_start, "unclosed action: missing }}"));
            };
            let start = self.pos;
            if rest.starts_with(" -}}") || rest.starts_with("\t-}}") || rest.starts_with("\n-}}") {
                self.pos += 4;
                self.tokens.push(Token {
                    kind: Tok::RightDelim,
                    pos: start,
                });
                return self.balanced(depth, start).map(|()| true);
            }
            if rest.starts_with("}}") {
                self.pos += 2;
                self.tokens.push(Token {
                    kind: Tok::RightDelim,
                    pos: start,
                });
                return self.balanced(depth, start).map(|()| false);
            }
            let kind = match c {
                ' ' | '\t' | '\r' | '\n' => {
                    self.pos += c.len_utf8();
                    continue;
                }
                '|' => self.single(Tok::Pipe),
                '(' => {
                    depth += 1;
                    self.single(Tok::LeftParen)
                }
                ')' => {
                    if depth == 0 {
                        return Err(ParseError::at(start, "unexpected right paren"));
                    }
                    depth -= 1;
                    self.single(Tok::RightParen)
                }
                ',' => self.single(Tok::Comma),
                ':' => {
                    if !rest.starts_with(":=") {
                        return Err(ParseError::at(start, "expected :="));
                    }
                    self.pos += 2;
                    Tok::Declare
                }
                '=' => self.single(Tok::Assign),
                '"' => Tok::String(self.quoted(start)?),
                '`' => {
                    let Some(end) = rest[1..].find('`') else {
                        return Err(ParseError::at(start, "unterminated raw string"));
                    };
                    self.pos += end + 2;
                    Tok::String(rest[1..=end].to_string())
                }
                '\'' => Tok::Char(self.char_constant(start)?),
                '$' => {
                    let name = ident_prefix(&rest[1..]);
                    self.pos += 1 + name.len();
                    Tok::Variable(name.to_string())
                }
                '.' => {
                    let next = rest[1..].chars().next();
                    if next.is_some_and(|n| n.is_ascii_digit()) {
                        self.number(start)?
                    } else {
                        let name = ident_prefix(&rest[1..]);
                        let chained = self.src[..start]
                            .chars()
                            .next_back()
                            .is_some_and(|p| p.is_alphanumeric() || p == '_' || p == ')' || p == '$');
                        self.pos += 1 + name.len();
                        if name.is_empty() {
                            Tok::Dot
                        } else {
                            Tok::Field {
                                name: name.to_string(),
                                chained,
                            }
                        }
                    }
                }
                '-' | '+' | '0'..='9' => self.number(start)?,
                c if c.is_alphabetic() || c == '_' => {
                    let name = ident_prefix(rest);
                    self.pos += name.len();
                    Tok::Ident(name.to_string())
                }
                other => return Err(ParseError::at(start, format!("unexpected {other:?} in action"))),
            };
            self.tokens.push(Token { kind, pos: start });
        }
    }

    fn balanced(&self, depth: usize, pos: usize) -> Result<(), ParseError> {
        if depth > 0 {
            Err(ParseError::at(pos, "unclosed left paren"))
        } else {
            Ok(())
        }
    }

    fn single(&mut self, tok: Tok) -> Tok {
        self.pos += 1;
        tok
    }

    fn number(&mut self, start: usize) -> Result<Tok, ParseError> {
        let rest = &self.src[self.pos..];
        let len = rest
            .char_indices()
            .take_while(|(i, c)| {
                c.is_ascii_alphanumeric()
                    || *c == '.'
                    || *c == '_'
                    || ((*c == '-' || *c == '+') && (*i == 0 || exp_sign(rest, *i)))
            })
            .map(|(i, c)| i + c.len_utf8())
            .last()
            .unwrap_or(0);
        let text = &rest[..len];
        if text == "-" || text == "+" || text.is_empty() {
            return Err(ParseError::at(start, format!("bad number syntax: {text:?}")));
        }
        self.pos += len;
        Ok(Tok::Number(text.to_string()))
    }

    fn quoted(&mut self, start: usize) -> Result<String, ParseError> {
        let rest = &self.src[self.pos + 1..];
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 2;
                    return Ok(out);
                }
                '\n' => break,
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        'x' | 'u' | 'U' => {
                            let width = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String = chars.by_ref().take(width).map(|(_, h)| h).collect();
                            let code = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                            out.push(code.ok_or_else(|| ParseError::at(start, format!("bad escape \\{e}{hex}")))?);
                        }
                        other => return Err(ParseError::at(start, format!("unknown escape sequence \\{other}"))),
                    }
                }
                c => out.push(c),
            }
        }
        Err(ParseError::at(start, "unterminated quoted string"))
    }

    fn char_constant(&mut self, start: usize) -> Result<char, ParseError> {
        let rest = &self.src[self.pos + 1..];
        let mut chars = rest.chars();
        let c = match chars.next() {
            Some('\\') => match chars.next() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('\\') => '\\',
                Some('\'') => '\'',
                _ => return Err(ParseError::at(start, "bad character constant")),
            },
            Some(c) => c,
            None => return Err(ParseError::at(start, "unterminated character constant")),
        };
        let consumed = rest.len() - chars.as_str().len();
        if !rest[consumed..].starts_with('\'') {
            return Err(ParseError::at(start, "unterminated character constant"));
        }
        self.pos += 1 + consumed + 1;
        Ok(c)
    }
}

/// A sign right after an exponent marker belongs to the number (`1e-3`), but not in hex.
fn exp_sign(text: &str, i: usize) -> bool {
    let before = text.as_bytes()[i - 1];
    (before == b'e' || before == b'E') && !text.starts_with("0x") && !text.starts_with("0X")
}

fn ident_prefix(s: &str) -> &str {
    let len = s
        .char_indices()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_')
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    &s[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn lex_should_split_text_and_actions() {
        assert_eq!(
            kinds("a {{ .spec.x | default \"y\" }} b"),
            vec![
                Tok::Text("a ".into()),
                Tok::LeftDelim,
                Tok::Field {
                    name: "spec".into(),
                    chained: false
                },
                Tok::Field {
                    name: "x".into(),
                    chained: true
                },
                Tok::Pipe,
                Tok::Ident("default".into()),
                Tok::String("y".into()),
                Tok::RightDelim,
                Tok::Text(" b".into()),
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn trim_markers_eat_neighbouring_whitespace_and_comments_vanish() {
        assert_eq!(
            kinds("a  {{- 1 -}}  b{{/* note */}}c"),
            vec![
                Tok::Text("a".into()),
                Tok::LeftDelim,
                Tok::Number("1".into()),
                Tok::RightDelim,
                Tok::Text("b".into()),
                Tok::Text("c".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn numbers_variables_and_declarations() {
        assert_eq!(
            kinds("{{ $x := -1.5e-3 }}{{ $ }}{{ 'a' }}"),
            vec![
                Tok::LeftDelim,
                Tok::Variable("x".into()),
                Tok::Declare,
                Tok::Number("-1.5e-3".into()),
                Tok::RightDelim,
                Tok::LeftDelim,
                Tok::Variable(String::new()),
                Tok::RightDelim,
                Tok::LeftDelim,
                Tok::Char('a'),
                Tok::RightDelim,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn errors_point_at_the_action() {
        let err = lex("ok {{ .x ").unwrap_err();
        assert_eq!(err.offset, 3);
        assert!(err.message.contains("unclosed action"));
        assert!(
            lex("{{ \"abc }}")
                .unwrap_err()
                .message
                .contains("unterminated quoted string")
        );
        assert!(lex("{{ ) }}").unwrap_err().message.contains("unexpected right paren"));
        assert!(lex("{{ (1 }}").unwrap_err().message.contains("unclosed left paren"));
    }
}
