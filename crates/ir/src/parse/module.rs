//! Module structure: the top level (`module`, `#` alias lines, resource blocks),
//! functions, regions and block arguments, and the value scopes that resolve
//! `%name` operands to the values defined so far.

use super::{plural, PResult, ParseError, Parser};
use crate::module::{Block, Func, FuncResult, Module, Op, Param, ValueId, Visibility};
use crate::types::TensorType;
use std::collections::HashMap;

impl Parser<'_> {
    pub(super) fn fresh(&mut self, ty: TensorType) -> ValueId {
        let v = ValueId(self.types.len() as u32);
        self.types.push(ty);
        v
    }

    pub(super) fn bind(&mut self, name: &str, group: Vec<ValueId>, pos: usize) -> PResult<()> {
        let scope = self.scopes.last_mut().ok_or_else(|| ParseError {
            file: String::new(),
            line: 0,
            col: 0,
            expected: "a scope".into(),
            found: "none".into(),
        })?;
        if scope.contains_key(name) {
            return Err(self.err_at(
                pos,
                "a fresh value name",
                format!("%{name} (defined before)"),
            ));
        }
        scope.insert(name.to_string(), group);
        Ok(())
    }

    /// `%name` (optionally `#k`) resolved to a defined value.
    pub(super) fn operand(&mut self) -> PResult<ValueId> {
        self.ws();
        let pos = self.pos;
        if self.peek() != Some(b'%') {
            return Err(self.err("a value (%name)"));
        }
        self.pos += 1;
        let name = self
            .suffix_id()
            .ok_or_else(|| self.err_at(pos, "a value name after '%'", "%"))?;
        let mut index = 0usize;
        if self.peek() == Some(b'#') {
            self.pos += 1;
            let n = self.rest().bytes().take_while(u8::is_ascii_digit).count();
            let text = self.rest().get(..n).unwrap_or("");
            index = text
                .parse()
                .map_err(|_| self.err_at(self.pos, "a result number after '#'", self.found()))?;
            self.pos += n;
        }
        let full = self.src.get(pos..self.pos).unwrap_or("%").to_string();
        for scope in self.scopes.iter().rev() {
            if let Some(group) = scope.get(name) {
                return group.get(index).copied().ok_or_else(|| {
                    self.err_at(pos, format!("a result number below {}", group.len()), full)
                });
            }
        }
        Err(self.err_at(pos, "a defined value", full))
    }

    /// `%a, %b, …`: stops before a comma that is not followed by another value.
    pub(super) fn operands(&mut self) -> PResult<Vec<ValueId>> {
        let mut v = Vec::new();
        if !self.at_byte(b'%') {
            return Ok(v);
        }
        v.push(self.operand()?);
        loop {
            let save = self.pos;
            if self.eat(",") && self.at_byte(b'%') {
                v.push(self.operand()?);
            } else {
                self.pos = save;
                return Ok(v);
            }
        }
    }

    /// The operands' types must be the ones the text states.
    pub(super) fn check_types(
        &self,
        operands: &[ValueId],
        tys: &[TensorType],
        pos: usize,
    ) -> PResult<()> {
        if operands.len() != tys.len() {
            return Err(self.err_at(
                pos,
                format!(
                    "{} (one per operand)",
                    plural(operands.len(), "operand type")
                ),
                plural(tys.len(), "type"),
            ));
        }
        for (k, (v, t)) in operands.iter().zip(tys).enumerate() {
            if let Some(actual) = self.types.get(v.index()) {
                if actual != t {
                    return Err(self.err_at(
                        pos,
                        format!("{actual} (the type of operand #{k})"),
                        t.to_string(),
                    ));
                }
            }
        }
        Ok(())
    }

    // ----- module and functions --------------------------------------------

    /// Skip `#alias = …` lines and `{-# … #-}` resource blocks.
    fn skip_top_level_noise(&mut self) -> PResult<()> {
        loop {
            self.ws();
            if self.at("{-#") {
                match self.rest().find("#-}") {
                    Some(i) => self.pos += i + 3,
                    None => return Err(self.err("'#-}' closing the resource block")),
                }
            } else if self.peek() == Some(b'#') {
                self.pos += 1;
                if self.suffix_id().is_none() {
                    return Err(self.err("an alias name after '#'"));
                }
                self.expect("=")?;
                // The value runs to the end of its line (brackets balanced).
                while self.peek().is_some_and(|b| b == b' ' || b == b'\t') {
                    self.pos += 1;
                }
                self.balanced(b"\n", false)?;
            } else {
                return Ok(());
            }
        }
    }

    pub(super) fn module(&mut self) -> PResult<Module> {
        self.skip_top_level_noise()?;
        let mut m = Module::default();
        if self.eat_kw("module") {
            if self.at_byte(b'@') {
                m.name = Some(self.symbol_ref()?);
            }
            if self.eat_kw("attributes") {
                m.attrs = Some(self.raw_dict()?);
            }
            self.expect("{")?;
            while !self.at("}") {
                if self.at_end() {
                    return Err(self.err("'}' closing the module"));
                }
                m.funcs.push(self.func()?);
            }
            self.expect("}")?;
            self.skip_loc()?;
        } else {
            if !self.at_kw("func.func") {
                return Err(self.err("'module' or 'func.func'"));
            }
            while self.at_kw("func.func") {
                m.funcs.push(self.func()?);
                self.skip_top_level_noise()?;
            }
        }
        self.skip_top_level_noise()?;
        if !self.at_end() {
            return Err(self.err("the end of the input"));
        }
        Ok(m)
    }

    fn func(&mut self) -> PResult<Func> {
        self.expect_kw("func.func")?;
        let visibility = if self.eat_kw("private") {
            Visibility::Private
        } else {
            if !self.eat_kw("public") {
                self.eat_kw("nested");
            }
            Visibility::Public
        };
        let name = self.symbol_ref()?;
        self.scopes = vec![HashMap::new()];
        self.types.clear();
        self.expect("(")?;
        let mut params = Vec::new();
        let mut args = Vec::new();
        if !self.eat(")") {
            loop {
                let (pname, ppos) = self.def_name()?;
                self.expect(":")?;
                let ty = self.tensor_type()?;
                let attrs = if self.at("{") {
                    Some(self.raw_dict()?)
                } else {
                    None
                };
                self.skip_loc()?;
                let v = self.fresh(ty.clone());
                self.bind(&pname, vec![v], ppos)?;
                args.push((v, ty.clone()));
                params.push(Param {
                    value: v,
                    ty,
                    attrs,
                });
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        let mut results = Vec::new();
        if self.eat("->") {
            if self.eat("(") {
                if !self.eat(")") {
                    loop {
                        results.push(self.func_result(true)?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
            } else {
                // Unparenthesised: a bare type; a `{` after it opens the body.
                results.push(self.func_result(false)?);
            }
        }
        let attrs = if self.eat_kw("attributes") {
            Some(self.raw_dict()?)
        } else {
            None
        };
        self.expect("{")?;
        let ops = self.block_ops()?;
        self.expect("}")?;
        self.skip_loc()?;
        let mut f = Func {
            name,
            visibility,
            params,
            results,
            body: Block { args, ops },
            attrs,
        };
        f.canonicalize();
        Ok(f)
    }

    fn func_result(&mut self, with_attrs: bool) -> PResult<FuncResult> {
        let ty = self.tensor_type()?;
        let attrs = if with_attrs && self.at("{") {
            Some(self.raw_dict()?)
        } else {
            None
        };
        self.skip_loc()?;
        Ok(FuncResult { ty, attrs })
    }

    /// `%name` being defined (a parameter or block argument).
    pub(super) fn def_name(&mut self) -> PResult<(String, usize)> {
        self.ws();
        let pos = self.pos;
        if self.peek() != Some(b'%') {
            return Err(self.err("a value name (%name)"));
        }
        self.pos += 1;
        match self.suffix_id() {
            Some(n) => Ok((n.to_string(), pos)),
            None => Err(self.err_at(pos, "a value name after '%'", "%")),
        }
    }

    /// Ops up to (not including) the closing `}` of a block.
    pub(super) fn block_ops(&mut self) -> PResult<Vec<Op>> {
        let mut ops = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'}') => return Ok(ops),
                None => return Err(self.err("'}' closing the block")),
                Some(b'^') => {
                    return Err(self.err("an op (certgrad supports single-block regions only)"))
                }
                _ => ops.push(self.op()?),
            }
        }
    }

    /// `{ [^bb0(%a: T, …):] ops }` in a fresh scope.
    pub(super) fn region(&mut self) -> PResult<Block> {
        self.nest()?;
        self.expect("{")?;
        self.scopes.push(HashMap::new());
        let mut args = Vec::new();
        if self.at_byte(b'^') {
            self.pos += 1;
            if self.suffix_id().is_none() {
                return Err(self.err("a block label after '^'"));
            }
            if self.eat("(") && !self.eat(")") {
                loop {
                    args.push(self.block_arg()?);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.expect(":")?;
        }
        let ops = self.block_ops()?;
        self.expect("}")?;
        self.scopes.pop();
        self.depth -= 1;
        Ok(Block { args, ops })
    }

    /// `%a: T [loc(…)]`, bound in the innermost scope.
    pub(super) fn block_arg(&mut self) -> PResult<(ValueId, TensorType)> {
        let (name, pos) = self.def_name()?;
        self.expect(":")?;
        let ty = self.tensor_type()?;
        self.skip_loc()?;
        let v = self.fresh(ty.clone());
        self.bind(&name, vec![v], pos)?;
        Ok((v, ty))
    }
}
