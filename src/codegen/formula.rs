//! The closed forms a lane map records (`g + 8·(reg%2)`, see `layout::fit`) as C++ expressions,
//! and an evaluator so the generator checks them against the map before writing them.
//!
//! The grammar is the one `fit` renders: integers, the names `lane`, `g` (= lane/4), `t`
//! (= lane%4), `reg`, `e` (element within the register), `+ - · / % ( )`, where `·`, `/` and
//! `%` bind tighter than `+` and `-` and everything associates to the left. That is also C++'s
//! precedence, and every `/` and `%` applies to non-negative values, where C++'s truncating
//! division agrees with the mathematical one; so the C++ text is the same text with `·` as `*`.

use anyhow::{Result, bail};

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(i64),
    Var(Var),
    Op(char),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    Lane,
    G,
    T,
    Reg,
    E,
}

impl Var {
    fn parse(s: &str) -> Option<Var> {
        Some(match s {
            "lane" => Var::Lane,
            "g" => Var::G,
            "t" => Var::T,
            "reg" => Var::Reg,
            "e" => Var::E,
            _ => return None,
        })
    }
    fn value(self, lane: i64, reg: i64, e: i64) -> i64 {
        match self {
            Var::Lane => lane,
            Var::G => lane / 4,
            Var::T => lane % 4,
            Var::Reg => reg,
            Var::E => e,
        }
    }
}

/// A parsed closed form.
#[derive(Clone, Debug)]
pub struct Formula {
    text: String,
    toks: Vec<Tok>,
}

impl Formula {
    /// Parse `fit`'s rendering; anything outside its grammar is an error.
    pub fn parse(text: &str) -> Result<Self> {
        let mut toks = Vec::new();
        let cs: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                let st = i;
                while i < cs.len() && cs[i].is_ascii_digit() {
                    i += 1;
                }
                let s: String = cs[st..i].iter().collect();
                toks.push(Tok::Num(s.parse()?));
            } else if c.is_ascii_alphabetic() {
                let st = i;
                while i < cs.len() && cs[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                let s: String = cs[st..i].iter().collect();
                match Var::parse(&s) {
                    Some(v) => toks.push(Tok::Var(v)),
                    None => bail!("unknown name '{s}' in closed form '{text}'"),
                }
            } else if "+-·/%()".contains(c) {
                toks.push(Tok::Op(c));
                i += 1;
            } else {
                bail!("unexpected '{c}' in closed form '{text}'");
            }
        }
        let f = Formula {
            text: text.to_string(),
            toks,
        };
        // Parse once to reject malformed text.
        let mut p = Parser {
            t: &f.toks,
            i: 0,
            vars: (0, 0, 0),
        };
        p.sum()?;
        if p.i != f.toks.len() {
            bail!("trailing text in closed form '{text}'");
        }
        Ok(f)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The value at (lane, reg, e).
    pub fn eval(&self, lane: u32, reg: u32, e: u32) -> i64 {
        let mut p = Parser {
            t: &self.toks,
            i: 0,
            vars: (lane as i64, reg as i64, e as i64),
        };
        p.sum().expect("checked by parse")
    }

    /// Which of `g` and `t` the formula names (they become locals of the C++ function).
    pub fn uses(&self, v: Var) -> bool {
        self.toks.contains(&Tok::Var(v))
    }

    /// The C++ expression: the same text with `·` as `*`.
    pub fn cpp(&self) -> String {
        self.text.replace('·', " * ")
    }
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
    vars: (i64, i64, i64),
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }
    fn sum(&mut self) -> Result<i64> {
        let mut v = if self.peek() == Some(&Tok::Op('-')) {
            self.i += 1;
            -self.product()?
        } else {
            self.product()?
        };
        while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek().cloned() {
            self.i += 1;
            let r = self.product()?;
            v = if c == '+' { v + r } else { v - r };
        }
        Ok(v)
    }
    fn product(&mut self) -> Result<i64> {
        let mut v = self.atom()?;
        while let Some(Tok::Op(c @ ('·' | '/' | '%'))) = self.peek().cloned() {
            self.i += 1;
            let r = self.atom()?;
            if c != '·' && r == 0 {
                bail!("division by zero");
            }
            v = match c {
                '·' => v * r,
                '/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }
    fn atom(&mut self) -> Result<i64> {
        let t = self.peek().cloned();
        self.i += 1;
        match t {
            Some(Tok::Num(n)) => Ok(n),
            Some(Tok::Var(v)) => Ok(v.value(self.vars.0, self.vars.1, self.vars.2)),
            Some(Tok::Op('(')) => {
                let v = self.sum()?;
                if self.peek() != Some(&Tok::Op(')')) {
                    bail!("unbalanced parentheses");
                }
                self.i += 1;
                Ok(v)
            }
            t => bail!("unexpected {t:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_like_cpp() {
        let f = Formula::parse("g + 8·(reg%2)").unwrap();
        assert_eq!(f.eval(5, 1, 0), 1 + 8);
        assert_eq!(f.cpp(), "g + 8 * (reg%2)");
        assert!(f.uses(Var::G) && !f.uses(Var::T));
        let f = Formula::parse("(lane/2)%8 + 3·(e%2) - 2·reg + 5").unwrap();
        assert_eq!(f.eval(7, 1, 3), 3 + 3 - 2 + 5);
        let f = Formula::parse("-(reg/2)").unwrap();
        assert_eq!(f.eval(0, 3, 0), -1);
        assert_eq!(Formula::parse("0").unwrap().eval(3, 2, 1), 0);
    }

    #[test]
    fn rejects_what_fit_never_writes() {
        assert!(Formula::parse("g + x").is_err());
        assert!(Formula::parse("g + (8").is_err());
        assert!(Formula::parse("g; system(1)").is_err());
        assert!(Formula::parse("g 8").is_err());
    }
}
