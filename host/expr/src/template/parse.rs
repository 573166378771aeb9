//! Tokens in, an AST out; function names are resolved here, once, so evaluation never
//! looks a name up.

use std::iter::Peekable;
use std::vec::IntoIter;

use serde_json::Value;

use super::error::ParseError;
use super::funcs::Func;
use super::lex::{Tok, Token};

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Text(String),
    Action(Pipeline),
    If {
        branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    With {
        branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    Range {
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Break,
    Continue,
}

#[derive(Debug, Clone)]
pub(crate) struct Pipeline {
    pub pos: usize,
    /// Variables declared (`:=`) or assigned (`=`) by this pipeline.
    pub vars: Vec<String>,
    pub assign: bool,
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Operand>,
}

#[derive(Debug, Clone)]
pub(crate) enum Operand {
    Dot,
    Literal(Value),
    /// `.a.b` relative to dot.
    Field(Vec<String>),
    /// `$x.a.b` (`$` alone is the root).
    Variable(String, Vec<String>),
    Function(String, Func),
    /// `(pipeline).a.b`
    Chain(Box<Pipeline>, Vec<String>),
}

/// Parses `tokens`, resolving each function name with `lookup` (the table that owns the
/// parse cache, passed as a function so the AST does not depend on the table).
pub(crate) fn parse(tokens: Vec<Token>, lookup: &dyn Fn(&str) -> Option<Func>) -> Result<Vec<Node>, ParseError> {
    let mut parser = Parser {
        tokens: tokens.into_iter().peekable(),
        lookup,
        range_depth: 0,
        vars: vec![vec!["".into()]],
    };
    let (nodes, end) = parser.list()?;
    match end {
        End::Eof => Ok(nodes),
        End::Keyword(word, pos) => Err(ParseError::at(pos, format!("unexpected {{{{{word}}}}}"))),
    }
}

enum End {
    Eof,
    /// `{{end}}` or `{{else ...}}`; the `else` clause's tokens are left for the caller.
    Keyword(&'static str, usize),
}

struct Parser<'f> {
    tokens: Peekable<IntoIter<Token>>,
    lookup: &'f dyn Fn(&str) -> Option<Func>,
    range_depth: usize,
    /// Declared variable names per scope, so an undefined `$x` fails at compile time.
    vars: Vec<Vec<String>>,
}

impl Parser<'_> {
    fn next(&mut self) -> Token {
        self.tokens.next().unwrap_or(Token { kind: Tok::Eof, pos: 0 })
    }

    fn peek(&mut self) -> &Tok {
        self.tokens.peek().map_or(&Tok::Eof, |t| &t.kind)
    }

    fn expect_right(&mut self, context: &str) -> Result<(), ParseError> {
        let token = self.next();
        if token.kind == Tok::RightDelim {
            Ok(())
        } else {
            Err(ParseError::at(
                token.pos,
                format!("unexpected {} in {context}", describe(&token.kind)),
            ))
        }
    }

    /// Parses nodes until EOF, `{{end}}` or `{{else`.
    fn list(&mut self) -> Result<(Vec<Node>, End), ParseError> {
        let mut nodes = Vec::new();
        loop {
            let token = self.next();
            match token.kind {
                Tok::Eof => return Ok((nodes, End::Eof)),
                Tok::Text(text) => nodes.push(Node::Text(text)),
                Tok::LeftDelim => {
                    let pos = self.tokens.peek().map_or(token.pos, |t| t.pos);
                    if let Tok::Ident(word) = self.peek().clone() {
                        match word.as_str() {
                            "end" => {
                                self.next();
                                self.expect_right("end")?;
                                return Ok((nodes, End::Keyword("end", pos)));
                            }
                            "else" => {
                                self.next();
                                return Ok((nodes, End::Keyword("else", pos)));
                            }
                            "if" | "with" => {
                                self.next();
                                nodes.push(self.conditional(&word, pos)?);
                                continue;
                            }
                            "range" => {
                                self.next();
                                nodes.push(self.range(pos)?);
                                continue;
                            }
                            "break" | "continue" => {
                                self.next();
                                if self.range_depth == 0 {
                                    return Err(ParseError::at(pos, format!("{{{{{word}}}}} outside {{{{range}}}}")));
                                }
                                self.expect_right(&word)?;
                                nodes.push(if word == "break" { Node::Break } else { Node::Continue });
                                continue;
                            }
                            "define" | "template" | "block" => {
                                return Err(ParseError::at(
                                    pos,
                                    format!("{{{{{word}}}}} is not supported in Katalog templates"),
                                ));
                            }
                            _ => {}
                        }
                    }
                    let pipe = self.pipeline(pos, true)?;
                    self.expect_right("command")?;
                    nodes.push(Node::Action(pipe));
                }
                other => return Err(ParseError::at(token.pos, format!("unexpected {}", describe(&other)))),
            }
        }
    }

    /// `if`/`with` with `else if`/`else with` chains.
    fn conditional(&mut self, word: &str, pos: usize) -> Result<Node, ParseError> {
        let mut branches = Vec::new();
        let mut otherwise = Vec::new();
        self.vars.push(Vec::new());
        let pipe_pos = self.tokens.peek().map_or(pos, |t| t.pos);
        let pipe = self.pipeline(pipe_pos, true)?;
        self.expect_right(word)?;
        let (body, mut end) = self.list()?;
        branches.push((pipe, body));
        loop {
            match end {
                End::Eof => {
                    return Err(ParseError::at(
                        pos,
                        format!("unclosed {{{{{word}}}}}: missing {{{{end}}}}"),
                    ));
                }
                End::Keyword("end", _) => break,
                End::Keyword(_, else_pos) => {
                    // `{{else if ...}}` / `{{else with ...}}` continue the chain.
                    if matches!(self.peek(), Tok::Ident(w) if w == word) {
                        self.next();
                        let pos = self.tokens.peek().map_or(else_pos, |t| t.pos);
                        let pipe = self.pipeline(pos, true)?;
                        self.expect_right(word)?;
                        let (body, next_end) = self.list()?;
                        branches.push((pipe, body));
                        end = next_end;
                    } else {
                        self.expect_right("else")?;
                        let (body, last) = self.list()?;
                        otherwise = body;
                        match last {
                            End::Keyword("end", _) => break,
                            End::Keyword(_, p) => return Err(ParseError::at(p, "more than one {{else}}")),
                            End::Eof => {
                                return Err(ParseError::at(
                                    pos,
                                    format!("unclosed {{{{{word}}}}}: missing {{{{end}}}}"),
                                ));
                            }
                        }
                    }
                }
            }
        }
        self.vars.pop();
        Ok(if word == "if" {
            Node::If { branches, otherwise }
        } else {
            Node::With { branches, otherwise }
        })
    }

    fn range(&mut self, pos: usize) -> Result<Node, ParseError> {
        self.vars.push(Vec::new());
        let pipe_pos = self.tokens.peek().map_or(pos, |t| t.pos);
        let pipe = self.pipeline(pipe_pos, true)?;
        if pipe.vars.len() > 2 {
            return Err(ParseError::at(pos, "range can declare at most two variables"));
        }
        self.expect_right("range")?;
        self.range_depth += 1;
        let (body, end) = self.list()?;
        self.range_depth -= 1;
        let otherwise = match end {
            End::Keyword("end", _) => Vec::new(),
            End::Keyword(_, _) => {
                self.expect_right("else")?;
                match self.list()? {
                    (body, End::Keyword("end", _)) => body,
                    (_, End::Keyword(_, p)) => return Err(ParseError::at(p, "more than one {{else}}")),
                    (_, End::Eof) => return Err(ParseError::at(pos, "unclosed {{range}}: missing {{end}}")),
                }
            }
            End::Eof => return Err(ParseError::at(pos, "unclosed {{range}}: missing {{end}}")),
        };
        self.vars.pop();
        Ok(Node::Range { pipe, body, otherwise })
    }

    /// A pipeline, with optional leading `$x :=` / `$x, $y :=` / `$x =`.
    fn pipeline(&mut self, pos: usize, allow_decl: bool) -> Result<Pipeline, ParseError> {
        let mut pipe = Pipeline {
            pos,
            vars: Vec::new(),
            assign: false,
            commands: Vec::new(),
        };
        if allow_decl && let Some(vars) = self.declarations() {
            let (vars, assign) = vars?;
            pipe.assign = assign;
            pipe.vars = vars;
        }
        loop {
            let cmd_pos = self.tokens.peek().map_or(pos, |t| t.pos);
            let args = self.operands()?;
            if args.is_empty() {
                return Err(ParseError::at(cmd_pos, "missing value for command"));
            }
            pipe.commands.push(Command { pos: cmd_pos, args });
            if *self.peek() == Tok::Pipe {
                self.next();
                continue;
            }
            break;
        }
        for (i, command) in pipe.commands.iter().enumerate() {
            if i > 0 && !matches!(command.args[0], Operand::Function(..)) {
                return Err(ParseError::at(command.pos, "non-function in pipeline after |"));
            }
        }
        if !pipe.assign {
            let scope = self.vars.last_mut().expect("a scope is always open");
            scope.extend(pipe.vars.iter().cloned());
        }
        Ok(pipe)
    }

    /// Looks ahead for `$x :=`, `$x, $y :=` or `$x =`.
    fn declarations(&mut self) -> Option<Result<(Vec<String>, bool), ParseError>> {
        let Tok::Variable(_) = self.peek() else { return None };
        // Clone the lookahead: a plain `$x.field` command must stay untouched.
        let ahead: Vec<Token> = self.tokens.clone().take(4).collect();
        let kinds: Vec<&Tok> = ahead.iter().map(|t| &t.kind).collect();
        let is_decl = matches!(
            kinds.as_slice(),
            [Tok::Variable(_), Tok::Declare | Tok::Assign, ..]
                | [
                    Tok::Variable(_),
                    Tok::Comma,
                    Tok::Variable(_),
                    Tok::Declare | Tok::Assign
                ]
        );
        if !is_decl {
            return None;
        }
        let mut vars = Vec::new();
        loop {
            let token = self.next();
            match token.kind {
                Tok::Variable(name) => vars.push(name),
                Tok::Comma => {}
                Tok::Declare => return Some(Ok((vars, false))),
                Tok::Assign => {
                    if let Some(name) = vars.iter().find(|v| !self.declared(v)) {
                        return Some(Err(ParseError::at(
                            token.pos,
                            format!("undefined variable \"${name}\""),
                        )));
                    }
                    return Some(Ok((vars, true)));
                }
                other => {
                    return Some(Err(ParseError::at(
                        token.pos,
                        format!("unexpected {}", describe(&other)),
                    )));
                }
            }
        }
    }

    fn declared(&self, name: &str) -> bool {
        self.vars.iter().any(|scope| scope.iter().any(|v| v == name))
    }

    fn operands(&mut self) -> Result<Vec<Operand>, ParseError> {
        let mut args = Vec::new();
        loop {
            let pos = self.tokens.peek().map_or(0, |t| t.pos);
            let operand = match self.peek().clone() {
                Tok::RightDelim | Tok::RightParen | Tok::Pipe | Tok::Eof => return Ok(args),
                Tok::Dot => {
                    self.next();
                    Operand::Dot
                }
                Tok::Field { .. } => Operand::Field(self.fields(true)),
                Tok::Variable(name) => {
                    self.next();
                    if !self.declared(&name) {
                        return Err(ParseError::at(pos, format!("undefined variable \"${name}\"")));
                    }
                    Operand::Variable(name, self.fields(false))
                }
                Tok::LeftParen => {
                    self.next();
                    let inner = self.pipeline(pos, false)?;
                    let close = self.next();
                    if close.kind != Tok::RightParen {
                        return Err(ParseError::at(close.pos, "expected )"));
                    }
                    Operand::Chain(Box::new(inner), self.fields(false))
                }
                Tok::String(s) => {
                    self.next();
                    Operand::Literal(Value::String(s))
                }
                Tok::Char(c) => {
                    self.next();
                    Operand::Literal(Value::from(u32::from(c)))
                }
                Tok::Number(text) => {
                    self.next();
                    Operand::Literal(
                        parse_number(&text)
                            .ok_or_else(|| ParseError::at(pos, format!("bad number syntax: {text:?}")))?,
                    )
                }
                Tok::Ident(word) => {
                    self.next();
                    match word.as_str() {
                        "true" => Operand::Literal(Value::Bool(true)),
                        "false" => Operand::Literal(Value::Bool(false)),
                        "nil" => Operand::Literal(Value::Null),
                        "if" | "else" | "end" | "range" | "with" | "break" | "continue" => {
                            return Err(ParseError::at(pos, format!("unexpected keyword {word:?} in command")));
                        }
                        _ => match (self.lookup)(&word) {
                            Some(func) => Operand::Function(word, func),
                            None => return Err(ParseError::at(pos, format!("function {word:?} not defined"))),
                        },
                    }
                }
                other => {
                    return Err(ParseError::at(
                        pos,
                        format!("unexpected {} in operand", describe(&other)),
                    ));
                }
            };
            args.push(operand);
        }
    }

    /// A chain of fields; `leading` accepts a first field that starts a new operand.
    fn fields(&mut self, leading: bool) -> Vec<String> {
        let mut fields = Vec::new();
        while let Tok::Field { name, chained } = self.peek().clone() {
            if !(chained || leading && fields.is_empty()) {
                break;
            }
            self.next();
            fields.push(name);
        }
        fields
    }
}

fn parse_number(text: &str) -> Option<Value> {
    let clean = text.replace('_', "");
    let (negative, digits) = match clean.strip_prefix('-') {
        Some(rest) => (true, rest.to_string()),
        None => (false, clean.trim_start_matches('+').to_string()),
    };
    let int = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(bin) = digits.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else {
        digits.parse::<i64>().ok()
    };
    if let Some(i) = int {
        return Some(Value::from(if negative { -i } else { i }));
    }
    let float: f64 = digits.parse().ok().filter(|f: &f64| f.is_finite())?;
    serde_json::Number::from_f64(if negative { -float } else { float }).map(Value::Number)
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Text(_) => "text".into(),
        Tok::LeftDelim => "{{".into(),
        Tok::RightDelim => "}}".into(),
        Tok::Dot => "\".\"".into(),
        Tok::Field { name, .. } => format!("field .{name}"),
        Tok::Variable(v) => format!("variable ${v}"),
        Tok::Ident(i) => format!("{i:?}"),
        Tok::String(s) => format!("string {s:?}"),
        Tok::Number(n) => format!("number {n}"),
        Tok::Char(c) => format!("character {c:?}"),
        Tok::Pipe => "|".into(),
        Tok::LeftParen => "(".into(),
        Tok::RightParen => ")".into(),
        Tok::Declare => ":=".into(),
        Tok::Assign => "=".into(),
        Tok::Comma => ",".into(),
        Tok::Eof => "end of template".into(),
    }
}

/// Every function a node list calls, in order of appearance.
pub(crate) fn collect_functions(nodes: &[Node], found: &mut Vec<(String, Func)>) {
    fn pipeline(pipe: &Pipeline, found: &mut Vec<(String, Func)>) {
        for command in &pipe.commands {
            for arg in &command.args {
                match arg {
                    Operand::Function(name, func) => found.push((name.clone(), *func)),
                    Operand::Chain(inner, _) => pipeline(inner, found),
                    _ => {}
                }
            }
        }
    }
    for node in nodes {
        match node {
            Node::Action(pipe) => pipeline(pipe, found),
            Node::If { branches, otherwise } | Node::With { branches, otherwise } => {
                for (pipe, body) in branches {
                    pipeline(pipe, found);
                    collect_functions(body, found);
                }
                collect_functions(otherwise, found);
            }
            Node::Range { pipe, body, otherwise } => {
                pipeline(pipe, found);
                collect_functions(body, found);
                collect_functions(otherwise, found);
            }
            Node::Text(_) | Node::Break | Node::Continue => {}
        }
    }
}
