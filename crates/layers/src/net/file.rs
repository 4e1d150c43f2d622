//! The file form of a NetSpec (docs/nets.md §1): TOML or JSON text
//! that IS the NetSpec's serde form, read and checked before anything is
//! built or allocated, with errors that name the file, line and field; and
//! the writer that turns any net (every built-in) into such a file.

use super::*;

/// A NetSpec file could not be read, or does not declare a net.
#[derive(Clone, Debug, PartialEq)]
pub struct NetFileError {
    /// `file:line:col` (or `file:line`, or `file`) where the reader knows it.
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for NetFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}
impl std::error::Error for NetFileError {}

/// The text formats a net file can be in, by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetFormat {
    Toml,
    Json,
}

impl NetFormat {
    /// The format of a file named `origin` (`.toml` or `.json`), or the
    /// "unknown net file format" error.
    pub fn of(origin: &str) -> Result<NetFormat, NetFileError> {
        match std::path::Path::new(origin)
            .extension()
            .and_then(|e| e.to_str())
        {
            Some("toml") => Ok(NetFormat::Toml),
            Some("json") => Ok(NetFormat::Json),
            other => Err(NetFileError {
                at: origin.to_string(),
                message: format!(
                    "unknown net file format{}: expected a .toml or .json file",
                    other.map_or(String::new(), |e| format!(" `.{e}`"))
                ),
            }),
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// The byte offset in `text` of the field `path` (`layers[3].main[1].stride`,
/// `classes`) of `net`. Each `list[i]` step moves to the first occurrence of
/// that entry's quoted name after the previous step (the entry is looked up
/// in the net's serde form, so every kind's lists are walked alike), past
/// the names of the entries before it; the last segment to the first key of
/// that name after it. `None` when the text
/// does not spell it so (the error then names the file alone).
fn locate(text: &str, net: &NetSpec, path: &str) -> Option<usize> {
    let tree = serde_json::to_value(net).ok()?;
    let mut cur = &tree;
    let mut at = 0;
    for seg in path.split('.') {
        if let Some((list, i)) = seg.strip_suffix(']').and_then(|s| s.split_once('[')) {
            // Past the names of the entries before it (names may repeat
            // across lists, and a duplicate within one is an error to place).
            let entries = cur.get(list)?.as_array()?;
            let i: usize = i.parse().ok()?;
            for (j, entry) in entries.get(..=i)?.iter().enumerate() {
                let name = entry.get("name")?.as_str()?;
                let (offset, len) = ["\"", "'"]
                    .iter()
                    .filter_map(|q| {
                        let quoted = format!("{q}{name}{q}");
                        text[at..].find(&quoted).map(|o| (o, quoted.len()))
                    })
                    .min()?;
                at += if j < i { offset + len } else { offset };
            }
            cur = &entries[i];
        } else if seg != "name" || at == 0 {
            // (An entry's `name` is where its name was found.)
            at += find_key(&text[at..], seg)?;
        }
    }
    Some(at)
}

/// The offset of the first key `key` in `text`: `"key":` (JSON) or a line
/// `key = …` (TOML).
fn find_key(text: &str, key: &str) -> Option<usize> {
    let json = text.find(&format!("\"{key}\""));
    let mut toml = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                toml = Some(offset + line.len() - trimmed.len());
                break;
            }
        }
        offset += line.len();
    }
    match (json, toml) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl NetSpec {
    /// Read a net from TOML or JSON text (the format by `origin`'s extension;
    /// `origin` names the file in errors) and check it before anything is
    /// built or allocated: the fields (`NetSpec::validate`, naming the file,
    /// line and field), then the shapes (`chain`, naming the layer), then
    /// the size against `limit`.
    pub fn from_text_with(
        text: &str,
        origin: &str,
        limit: SizeLimit,
    ) -> Result<NetSpec, NetFileError> {
        let net: NetSpec = match NetFormat::of(origin)? {
            NetFormat::Toml => toml::from_str(text).map_err(|e| NetFileError {
                at: match e.span() {
                    Some(span) => {
                        let (l, c) = line_col(text, span.start);
                        format!("{origin}:{l}:{c}")
                    }
                    None => origin.to_string(),
                },
                message: e.message().trim_end().to_string(),
            })?,
            NetFormat::Json => serde_json::from_str(text).map_err(|e| NetFileError {
                at: format!("{origin}:{}:{}", e.line(), e.column()),
                message: e.to_string(),
            })?,
        };
        let at_path = |path: &str| match locate(text, &net, path) {
            Some(offset) => format!("{origin}:{}", line_col(text, offset).0),
            None => origin.to_string(),
        };
        if let Err(e) = net.validate() {
            return Err(NetFileError {
                at: at_path(&e.field),
                message: e.message,
            });
        }
        // The chain's errors start with the net and the top-level layer name.
        let at_layer_of = |message: &str| {
            net.layers
                .iter()
                .position(|(n, _)| message.starts_with(&format!("{}: {n}: ", net.name)))
                .map_or_else(|| origin.to_string(), |i| at_path(&format!("layers[{i}]")))
        };
        net.check_size(limit).map_err(|e| NetFileError {
            at: at_layer_of(&e.0),
            message: e.0,
        })?;
        Ok(net)
    }

    /// [`NetSpec::from_text_with`] under the default (or
    /// `CERTGRAD_MAX_FLOATS`) size limit.
    pub fn from_text(text: &str, origin: &str) -> Result<NetSpec, NetFileError> {
        let limit = SizeLimit::from_env().map_err(|m| NetFileError {
            at: origin.to_string(),
            message: m,
        })?;
        NetSpec::from_text_with(text, origin, limit)
    }

    /// Read a net from a `.toml` or `.json` file.
    pub fn load(path: &std::path::Path) -> Result<NetSpec, NetFileError> {
        let origin = path.display().to_string();
        NetFormat::of(&origin)?;
        let text = std::fs::read_to_string(path).map_err(|e| NetFileError {
            at: origin.clone(),
            message: e.to_string(),
        })?;
        NetSpec::from_text(&text, &origin)
    }

    /// The net as the text of a file of `format`, which reads back to this
    /// net (the emission choice `pool_backward` is not part of it).
    pub fn to_text(&self, format: NetFormat) -> Result<String, String> {
        match format {
            NetFormat::Toml => toml::to_string(self).map_err(|e| e.to_string()),
            NetFormat::Json => serde_json::to_string_pretty(self)
                .map(|t| t + "\n")
                .map_err(|e| e.to_string()),
        }
    }

    /// Write the net to `path` (`.toml` or `.json`).
    pub fn write(&self, path: &std::path::Path) -> Result<(), NetFileError> {
        let origin = path.display().to_string();
        let err = |message: String| NetFileError {
            at: origin.clone(),
            message,
        };
        let text = self.to_text(NetFormat::of(&origin)?).map_err(err)?;
        std::fs::write(path, text).map_err(|e| err(e.to_string()))
    }
}

/// Whether a net argument names a file rather than a built-in: it has an
/// extension or a path separator, or a file of that name exists.
pub fn is_file_arg(name_or_file: &str) -> bool {
    let p = std::path::Path::new(name_or_file);
    p.extension().is_some() || name_or_file.contains(std::path::MAIN_SEPARATOR) || p.is_file()
}

/// The one resolver every command's net argument goes through: a built-in
/// net by name, or a net file (`.toml` / `.json`; any other extension is an
/// "unknown net file format" error). Either is size-checked
/// (`CERTGRAD_MAX_FLOATS`) before the caller builds anything.
pub fn resolve(name_or_file: &str) -> Result<NetSpec, NetFileError> {
    if is_file_arg(name_or_file) {
        return NetSpec::load(std::path::Path::new(name_or_file));
    }
    let net = by_name(name_or_file).ok_or_else(|| NetFileError {
        at: name_or_file.to_string(),
        message: format!(
            "no built-in net of that name (built-in: {}; or give a .toml/.json file)",
            catalog()
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })?;
    let limit = SizeLimit::from_env().map_err(|m| NetFileError {
        at: name_or_file.to_string(),
        message: m,
    })?;
    net.check_size(limit).map_err(|e| NetFileError {
        at: name_or_file.to_string(),
        message: e.0,
    })?;
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/nets")
            .join(name)
    }

    #[test]
    fn the_example_file_declares_a_batch_bn_conv_net() {
        let net = NetSpec::load(&example("tiny.toml")).unwrap();
        assert_eq!(net.name, "tiny-bbn");
        assert_eq!(net.input, (3, 8, 8));
        assert_eq!(net.label_smoothing, None);
        assert_eq!(net.bn_world(), Some(BnWorld::Batch));
        // conv 3→4 (108+4), bn (4+4), conv 4→8 (288+8), bn (8+8),
        // dense 32→16 (512+16), dense 16→4 (64+4).
        assert_eq!(net.param_count().unwrap(), (12, 1028));
        assert!(net.layers.contains(&(
            "stage2.pool".into(),
            LayerSpec::MaxPool(MaxPoolSpec {
                window: 3,
                stride: 2,
                pad: 1
            })
        )));
    }

    #[test]
    fn json_and_toml_declare_the_same_net() {
        let toml_net = NetSpec::load(&example("tiny.toml")).unwrap();
        let json = r#"{"name": "tiny-bbn", "input": [3, 8, 8], "classes": 4, "label_smoothing": "none", "layers": [
            {"name": "stage1.conv", "op": "conv2d", "k": 3, "stride": 1, "padding": "symmetric", "out_ch": 4, "bias": true},
            {"name": "stage1.bn", "op": "batch_norm", "world": "batch", "eps": 1e-5},
            {"name": "stage1.pool", "op": "max_pool", "window": 2, "stride": 2, "pad": 0},
            {"name": "stage1.relu", "op": "relu"},
            {"name": "stage2.conv", "op": "conv2d", "k": 3, "stride": 1, "padding": "symmetric", "out_ch": 8, "bias": true},
            {"name": "stage2.bn", "op": "batch_norm", "world": "batch", "eps": 1e-5},
            {"name": "stage2.pool", "op": "max_pool", "window": 3, "stride": 2, "pad": 1},
            {"name": "stage2.relu", "op": "relu"},
            {"name": "flatten", "op": "flatten"},
            {"name": "dense1", "op": "dense", "out_f": 16, "bias": true},
            {"name": "dense1.relu", "op": "relu"},
            {"name": "dense2", "op": "dense", "out_f": 4, "bias": true}]}"#;
        assert_eq!(NetSpec::from_text(json, "tiny.json").unwrap(), toml_net);
    }

    #[test]
    fn reader_errors_name_the_line() {
        let text = std::fs::read_to_string(example("tiny.toml")).unwrap();
        // A syntax error: the reader's own line and column.
        let bad = text.replace(
            "k = 3\nstride = 1\npadding = \"symmetric\"\nout_ch = 4",
            "k = = 3",
        );
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.at.starts_with("t.toml:14:"), "{e}");
        // An omitted convention is an error, not a default: the reader names
        // the field and the layer's table.
        let bad = text.replacen("padding = \"symmetric\"\n", "", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("padding"), "{e}");
        assert!(e.at.starts_with("t.toml:11:"), "{e}");
        // A field of another kind, and a misspelt one: named, with a line.
        for (from, to, field) in [
            (
                "world = \"batch\"",
                "world = \"batch\"\nwindow = 2",
                "window",
            ),
            ("out_f = 16", "outf = 16", "outf"),
        ] {
            let e = NetSpec::from_text(&text.replacen(from, to, 1), "t.toml").unwrap_err();
            assert!(e.message.contains(field), "{e}");
            assert!(e.at.starts_with("t.toml:"), "{e}");
        }
        // No default label smoothing either.
        let bad = text.replacen("label_smoothing = \"none\"", "", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("label_smoothing"), "{e}");
    }

    #[test]
    fn shape_errors_name_the_layer_and_its_line() {
        let text = std::fs::read_to_string(example("tiny.toml")).unwrap();
        let bad = text.replacen("out_f = 4", "out_f = 5", 1);
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("expected logits [B, 4]"), "{e}");
        // A global average pool where an NCHW input was expected downstream.
        let bad = text.replacen(
            "eps = 1e-5",
            "eps = 1e-5\n[[layers]]\nname = \"x\"\nop = \"global_avg_pool\"",
            1,
        );
        let e = NetSpec::from_text(&bad, "t.toml").unwrap_err();
        assert!(e.message.contains("stage1.pool"), "{e}");
        let line = |needle: &str| text[..text.find(needle).unwrap()].matches('\n').count() + 1;
        // The pool's `name` line (the inserted layer is 3 lines above it).
        assert_eq!(
            e.at,
            format!("t.toml:{}", line("\"stage1.pool\"") + 3),
            "{e}"
        );
    }

    #[test]
    fn unknown_formats_and_names_are_clear_errors() {
        assert_eq!(resolve("cifar8").unwrap().name, "cifar8");
        let e = resolve("cifar9").unwrap_err();
        assert!(e.message.contains("cifar8-bbn"), "{e}");
        for f in ["net.yaml", "net.TOML", "dir/net"] {
            let e = resolve(f).unwrap_err();
            assert!(e.message.contains("unknown net file format"), "{f}: {e}");
            assert_eq!(e.at, f);
        }
        let e = resolve("no-such-file.toml").unwrap_err();
        assert_eq!(e.at, "no-such-file.toml");
    }
}
