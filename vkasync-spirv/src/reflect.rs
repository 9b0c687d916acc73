//! A small SPIR-V reader: just enough reflection to check a dispatch against its kernel
//! (storage/uniform buffer bindings in set 0, which of them are read-only, the push-constant
//! block's size and the workgroup size). Anything malformed is an [`InvalidSpirv`]. vkasync uses
//! it at run time (its `Kernel` checks every dispatch against it); this crate uses it at build
//! time for the constants it generates.

use std::collections::HashMap;

/// A module this reader cannot make sense of, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSpirv(pub String);

impl std::fmt::Display for InvalidSpirv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidSpirv {}

type Result<T> = std::result::Result<T, InvalidSpirv>;

const MAGIC: u32 = 0x0723_0203;

// Opcodes.
const OP_ENTRY_POINT: u16 = 15;
const OP_EXECUTION_MODE: u16 = 16;
const OP_TYPE_INT: u16 = 21;
const OP_TYPE_FLOAT: u16 = 22;
const OP_TYPE_VECTOR: u16 = 23;
const OP_TYPE_MATRIX: u16 = 24;
const OP_TYPE_ARRAY: u16 = 28;
const OP_TYPE_RUNTIME_ARRAY: u16 = 29;
const OP_TYPE_STRUCT: u16 = 30;
const OP_TYPE_POINTER: u16 = 32;
const OP_CONSTANT: u16 = 43;
const OP_VARIABLE: u16 = 59;
const OP_DECORATE: u16 = 71;
const OP_MEMBER_DECORATE: u16 = 72;

// Decorations.
const DEC_BLOCK: u32 = 2;
const DEC_BUFFER_BLOCK: u32 = 3;
const DEC_ARRAY_STRIDE: u32 = 6;
const DEC_MATRIX_STRIDE: u32 = 7;
const DEC_NON_WRITABLE: u32 = 24;
const DEC_BINDING: u32 = 33;
const DEC_DESCRIPTOR_SET: u32 = 34;
const DEC_OFFSET: u32 = 35;

// Storage classes.
const SC_UNIFORM_CONSTANT: u32 = 0;
const SC_UNIFORM: u32 = 2;
const SC_PUSH_CONSTANT: u32 = 9;
const SC_STORAGE_BUFFER: u32 = 12;

const EXECUTION_MODEL_GLCOMPUTE: u32 = 5;
const EXECUTION_MODE_LOCAL_SIZE: u32 = 17;

/// The kind of a descriptor binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// A storage buffer (`buffer` block in GLSL).
    Storage,
    /// A uniform buffer (`uniform` block in GLSL).
    Uniform,
}

/// One descriptor binding of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindingInfo {
    /// The binding number in set 0.
    pub binding: u32,
    /// Storage or uniform buffer.
    pub kind: BindingKind,
    /// Whether the kernel only reads it (`readonly` in GLSL, or a uniform buffer).
    pub read_only: bool,
    /// The static size of its block in bytes: the size without a trailing runtime array. A
    /// buffer bound here must be at least this large.
    pub min_size: u64,
}

/// What vkasync needs to know about a compute kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflection {
    /// The compute entry point's name.
    pub entry_point: String,
    /// Buffer bindings of set 0, sorted by binding number.
    pub bindings: Vec<BindingInfo>,
    /// Size of the push-constant block in bytes (0 when there is none).
    pub push_constant_size: u32,
    /// `local_size_x/y/z`, where declared as literals.
    pub local_size: [u32; 3],
}

/// Turns bytes into words, checking length and alignment.
pub fn words_from_bytes(bytes: &[u8]) -> Result<Vec<u32>> {
    if bytes.len() % 4 != 0 || bytes.len() < 20 {
        return Err(InvalidSpirv(format!(
            "{} bytes is not a SPIR-V module (a multiple of 4, at least 20)",
            bytes.len()
        )));
    }
    let mut words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if words[0] == MAGIC.swap_bytes() {
        for w in &mut words {
            *w = w.swap_bytes();
        }
    }
    Ok(words)
}

#[derive(Default)]
struct Types {
    scalar: HashMap<u32, u32>,
    vector: HashMap<u32, (u32, u32)>,
    /// Matrices (column type, column count); also in `vector`.
    matrix: HashMap<u32, (u32, u32)>,
    array: HashMap<u32, (u32, u32)>,
    structs: HashMap<u32, Vec<u32>>,
    pointer: HashMap<u32, (u32, u32)>,
    constants: HashMap<u32, u32>,
}

/// Reads what vkasync needs from a SPIR-V module.
pub fn reflect(words: &[u32]) -> Result<Reflection> {
    let bad = |m: &str| InvalidSpirv(m.to_string());
    if words.len() < 5 || words[0] != MAGIC {
        return Err(bad("bad magic number"));
    }
    let mut types = Types::default();
    let mut decorations: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    let mut member_decorations: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
    let mut variables: Vec<(u32, u32, u32)> = Vec::new();
    let mut entry: Option<(u32, String)> = None;
    let mut local_size = [1, 1, 1];
    let mut local_size_of: HashMap<u32, [u32; 3]> = HashMap::new();

    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        let op = (words[i] & 0xffff) as u16;
        if count == 0 || i + count > words.len() {
            return Err(bad("truncated instruction"));
        }
        let ops = &words[i + 1..i + count];
        let arg = |k: usize| ops.get(k).copied().ok_or_else(|| bad("instruction too short"));
        match op {
            OP_ENTRY_POINT if arg(0)? == EXECUTION_MODEL_GLCOMPUTE && entry.is_none() => {
                let name_words = &ops[2..];
                let bytes: Vec<u8> = name_words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                entry = Some((arg(1)?, String::from_utf8_lossy(&bytes[..end]).into_owned()));
            }
            OP_EXECUTION_MODE if arg(1)? == EXECUTION_MODE_LOCAL_SIZE => {
                local_size_of.insert(arg(0)?, [arg(2)?, arg(3)?, arg(4)?]);
            }
            OP_TYPE_INT | OP_TYPE_FLOAT => {
                types.scalar.insert(arg(0)?, arg(1)? / 8);
            }
            OP_TYPE_VECTOR | OP_TYPE_MATRIX => {
                types.vector.insert(arg(0)?, (arg(1)?, arg(2)?));
                if op == OP_TYPE_MATRIX {
                    types.matrix.insert(arg(0)?, (arg(1)?, arg(2)?));
                }
            }
            OP_TYPE_ARRAY => {
                types.array.insert(arg(0)?, (arg(1)?, arg(2)?));
            }
            OP_TYPE_RUNTIME_ARRAY => {
                types.array.insert(arg(0)?, (arg(1)?, u32::MAX));
            }
            OP_TYPE_STRUCT => {
                types.structs.insert(arg(0)?, ops[1..].to_vec());
            }
            OP_TYPE_POINTER => {
                types.pointer.insert(arg(0)?, (arg(1)?, arg(2)?));
            }
            OP_CONSTANT => {
                types.constants.insert(arg(1)?, arg(2)?);
            }
            OP_VARIABLE => variables.push((arg(0)?, arg(1)?, arg(2)?)),
            OP_DECORATE => {
                decorations.entry(arg(0)?).or_default().push((arg(1)?, ops.get(2).copied().unwrap_or(0)));
            }
            OP_MEMBER_DECORATE => {
                member_decorations
                    .entry((arg(0)?, arg(1)?))
                    .or_default()
                    .push((arg(2)?, ops.get(3).copied().unwrap_or(0)));
            }
            _ => {}
        }
        i += count;
    }
    let (entry_id, entry_point) = entry.ok_or_else(|| bad("no GLCompute entry point"))?;
    if let Some(ls) = local_size_of.get(&entry_id) {
        local_size = *ls;
    }
    let dec = |id: u32, d: u32| decorations.get(&id).and_then(|v| v.iter().find(|(k, _)| *k == d).map(|(_, x)| *x));
    let has_dec = |id: u32, d: u32| decorations.get(&id).is_some_and(|v| v.iter().any(|(k, _)| *k == d));
    let member_dec = |s: u32, m: u32, d: u32| {
        member_decorations.get(&(s, m)).and_then(|v| v.iter().find(|(k, _)| *k == d).map(|(_, x)| *x))
    };

    // Size of a type as laid out by explicit offsets/strides.
    fn size_of(
        t: u32,
        types: &Types,
        dec: &dyn Fn(u32, u32) -> Option<u32>,
        mdec: &dyn Fn(u32, u32, u32) -> Option<u32>,
        depth: u32,
    ) -> Result<u32> {
        if depth > 16 {
            return Err(InvalidSpirv("type nesting too deep".into()));
        }
        if let Some(s) = types.scalar.get(&t) {
            return Ok(*s);
        }
        if let Some((c, n)) = types.vector.get(&t) {
            let stride = dec(t, DEC_MATRIX_STRIDE);
            let elem = size_of(*c, types, dec, mdec, depth + 1)?;
            return Ok(stride.unwrap_or(elem) * n);
        }
        if let Some((e, len_id)) = types.array.get(&t) {
            let elem = size_of(*e, types, dec, mdec, depth + 1)?;
            let stride = dec(t, DEC_ARRAY_STRIDE).unwrap_or(elem);
            if *len_id == u32::MAX {
                return Ok(0);
            }
            let n = types.constants.get(len_id).copied().unwrap_or(1);
            return Ok(stride.saturating_mul(n));
        }
        if let Some(members) = types.structs.get(&t) {
            let mut end = 0;
            for (m, mt) in members.iter().enumerate() {
                let off = mdec(t, m as u32, DEC_OFFSET).unwrap_or(0);
                // A matrix member's column stride is a decoration of the member, not the type.
                let size = match (types.matrix.get(mt), mdec(t, m as u32, DEC_MATRIX_STRIDE)) {
                    (Some((_, cols)), Some(stride)) => stride.saturating_mul(*cols),
                    _ => size_of(*mt, types, dec, mdec, depth + 1)?,
                };
                end = end.max(off.saturating_add(size));
            }
            return Ok(end);
        }
        Err(InvalidSpirv(format!("unsupported type %{t} in a push-constant or buffer block")))
    }

    let mut bindings = Vec::new();
    let mut push_constant_size = 0;
    for &(ptr_type, var, class) in &variables {
        let pointee = types.pointer.get(&ptr_type).map(|p| p.1);
        match class {
            SC_PUSH_CONSTANT => {
                let t = pointee.ok_or_else(|| bad("push constant without pointer type"))?;
                push_constant_size = push_constant_size.max(size_of(t, &types, &dec, &member_dec, 0)?);
            }
            SC_STORAGE_BUFFER | SC_UNIFORM => {
                let set = dec(var, DEC_DESCRIPTOR_SET).unwrap_or(0);
                let binding = dec(var, DEC_BINDING).ok_or_else(|| bad("buffer variable without a binding"))?;
                if set != 0 {
                    return Err(bad("only descriptor set 0 is supported"));
                }
                let mut t = pointee.ok_or_else(|| bad("buffer variable without pointer type"))?;
                if let Some((e, _)) = types.array.get(&t) {
                    return Err(InvalidSpirv(format!(
                        "binding {binding} is an array of buffers (type %{e}); not supported"
                    )));
                }
                if !types.structs.contains_key(&t) {
                    t = 0;
                }
                let kind = if class == SC_STORAGE_BUFFER || has_dec(t, DEC_BUFFER_BLOCK) {
                    BindingKind::Storage
                } else if has_dec(t, DEC_BLOCK) {
                    BindingKind::Uniform
                } else {
                    return Err(bad("buffer variable of an unknown kind"));
                };
                let members = types.structs.get(&t).map_or(0, |m| m.len() as u32);
                let min_size = if t == 0 { 0 } else { size_of(t, &types, &dec, &member_dec, 0)? as u64 };
                let read_only = kind == BindingKind::Uniform
                    || has_dec(var, DEC_NON_WRITABLE)
                    || (members > 0 && (0..members).all(|m| member_dec(t, m, DEC_NON_WRITABLE).is_some()));
                bindings.push(BindingInfo { binding, kind, read_only, min_size });
            }
            SC_UNIFORM_CONSTANT if dec(var, DEC_BINDING).is_some() => {
                return Err(bad("image or sampler bindings are not supported; use buffers"));
            }
            _ => {}
        }
    }
    bindings.sort_by_key(|b| b.binding);
    if bindings.windows(2).any(|w| w[0].binding == w[1].binding) {
        return Err(bad("two buffer variables share a binding"));
    }
    Ok(Reflection { entry_point, bindings, push_constant_size, local_size })
}
