//! `ork component new`: a WASI preview1 core module (Go's `wasip1` port, with the canonical
//! ABI of our WIT worlds written by hand, as the Go SDK does) made a component. The WIT is
//! embedded, wasmtime's own preview1 reactor adapter supplies WASI on top of WASI 0.2, and a
//! module that carries the Go SDK's adapter arena gets a `cabi_realloc_adapter` serving it.
//!
//! Why the arena: the adapter takes memory for its state and stack at the first WASI call,
//! which Go's runtime makes while it starts (reading the clock), before any Go code could
//! serve an allocation; and pages the adapter grew itself would later be handed out by Go's
//! allocator again, which assumes it alone grows memory. The arena lies in Go's static data,
//! which its allocator never hands out.

use crate::error::Error;
use std::ops::Range;

use wasm_encoder::{Encode, Function, Instruction, MemArg};
use wasmparser::{Operator, Parser, Payload, TypeRef};
use wit_component::{ComponentEncoder, StringEncoding};

use orkestra_katalog::component::World;

/// The WIT package every component is built against.
const WIT: &str = include_str!("../../../wit/operator.wit");

/// How the Go SDK marks its arena (`adapterArena` in guest-sdk/go/abi.go); version 1 is 256
/// KiB, its first 32 bytes the marker and the allocator's next free address.
const ARENA_MARKER: &[u8] = b"orkestra:adapter-arena/1";
const ARENA_SIZE: u32 = 256 << 10;
const ARENA_NEXT: u32 = 24;
const ARENA_START: u32 = 32;

const ADAPTER_REALLOC: &str = "cabi_realloc_adapter";

/// The component of `module` for `world`.
///
/// # Errors
/// What is wrong with the module: not a core module, an arena found twice, a module
/// wit-component cannot adapt (the reason names the missing export or import).
pub fn new_component(module: &[u8], world: World) -> Result<Vec<u8>, Error> {
    if !Parser::is_core_wasm(module) {
        return Err(Error::Componentize(match Parser::is_component(module) {
            true => "already a component".into(),
            false => "not a WebAssembly module".into(),
        }));
    }
    let mut module = match find_arena(module)? {
        Some(arena) => with_adapter_realloc(module, arena)?,
        None => module.to_vec(),
    };
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str("operator.wit", WIT)
        .map_err(|e| Error::Componentize(format!("the WIT package: {e:#}")))?;
    let name = match world {
        World::Hook => "hook",
        // A WIT keyword, so escaped.
        World::Constructor => "%constructor",
    };
    let world = resolve
        .select_world(&[package], Some(name))
        .map_err(|e| Error::Componentize(format!("{e:#}")))?;
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .map_err(|e| Error::Componentize(format!("embedding the {name} world: {e:#}")))?;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .and_then(|encoder| {
            encoder.adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|mut encoder| encoder.encode())
        .map_err(|e| Error::Componentize(format!("{e:#}")))
}

/// The arena's address, if the module's data holds exactly one marker.
fn find_arena(module: &[u8]) -> Result<Option<u32>, Error> {
    let mut found = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        let Payload::DataSection(reader) = payload.map_err(unreadable)? else {
            continue;
        };
        for data in reader {
            let data = data.map_err(unreadable)?;
            let wasmparser::DataKind::Active {
                memory_index: 0,
                offset_expr,
            } = data.kind
            else {
                continue;
            };
            let Some(Ok(Operator::I32Const { value })) = offset_expr.get_operators_reader().into_iter().next() else {
                continue;
            };
            let mut from = 0;
            while let Some(at) = find(&data.data[from..], ARENA_MARKER) {
                found.push((value as u32).wrapping_add((from + at) as u32));
                from += at + 1;
            }
        }
    }
    match found[..] {
        [] => Ok(None),
        [arena] if arena % 8 == 0 => Ok(Some(arena)),
        [arena] => Err(Error::Componentize(format!(
            "the adapter arena at {arena:#x} is not 8-aligned"
        ))),
        _ => Err(Error::Componentize(format!(
            "the adapter arena's marker is there {} times",
            found.len()
        ))),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `module` with one more function, exported as `cabi_realloc_adapter`: a bump allocator
/// over the arena that traps when it is spent (the adapter asks for a few pages, once).
/// Sections are extended in place, so nothing else of the module moves.
fn with_adapter_realloc(module: &[u8], arena: u32) -> Result<Vec<u8>, Error> {
    let mut imported = 0u32;
    let mut types = None;
    let mut sections: Vec<(u8, Range<usize>)> = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(unreadable)?;
        match &payload {
            Payload::ImportSection(reader) => {
                for import in reader.clone().into_imports() {
                    imported += u32::from(matches!(import.map_err(unreadable)?.ty, TypeRef::Func(_)));
                }
            }
            Payload::TypeSection(reader) => {
                let mut count = 0u32;
                for group in reader.clone() {
                    if group.map_err(unreadable)?.types().len() != 1 {
                        return Err(Error::Componentize(
                            "a module with recursive type groups cannot take the adapter arena".into(),
                        ));
                    }
                    count += 1;
                }
                types = Some(count);
            }
            Payload::ExportSection(reader) => {
                for export in reader.clone() {
                    if export.map_err(unreadable)?.name == ADAPTER_REALLOC {
                        return Err(Error::Componentize(format!(
                            "the module exports {ADAPTER_REALLOC} and carries the adapter arena"
                        )));
                    }
                }
            }
            _ => {}
        }
        if let Some(section) = payload.as_section() {
            sections.push(section);
        }
    }
    let Some(type_index) = types else {
        return Err(Error::Componentize("the module has no type section".into()));
    };
    let defined = sections
        .iter()
        .find(|(id, _)| *id == wasm_encoder::SectionId::Function as u8)
        .map(|(_, range)| leb(&module[range.clone()]))
        .transpose()?
        .ok_or_else(|| Error::Componentize("the module has no function section".into()))?;
    let function_index = imported + defined;

    let mut signature = vec![0x60, 4];
    signature.extend([0x7f; 4]);
    signature.extend([1, 0x7f]);
    let mut entry = Vec::new();
    ADAPTER_REALLOC.encode(&mut entry);
    entry.push(0x00);
    function_index.encode(&mut entry);
    let mut body = Vec::new();
    arena_realloc(arena).encode(&mut body);
    let mut additions = [
        (wasm_encoder::SectionId::Type as u8, signature),
        (wasm_encoder::SectionId::Function as u8, leb_bytes(type_index)),
        (wasm_encoder::SectionId::Export as u8, entry),
        (wasm_encoder::SectionId::Code as u8, body),
    ];

    let mut out = module[..8].to_vec();
    for (id, range) in sections {
        let content = &module[range];
        let content = match additions.iter_mut().find(|(added, _)| *added == id) {
            Some((_, addition)) => {
                let count = leb(content)?;
                let mut extended = leb_bytes(count + 1);
                extended.extend_from_slice(&content[leb_len(content)..]);
                extended.append(addition);
                extended
            }
            None => content.to_vec(),
        };
        out.push(id);
        content.len().encode(&mut out);
        out.extend(content);
    }
    if let Some((id, _)) = additions.iter().find(|(_, addition)| !addition.is_empty()) {
        return Err(Error::Componentize(format!("the module has no section {id} to extend")));
    }
    Ok(out)
}

/// `cabi_realloc_adapter(old, old_size, align, new_size)`: the next aligned block of the
/// arena; the address after it is kept in the arena's header.
fn arena_realloc(arena: u32) -> Function {
    let (next, start, end) = (arena + ARENA_NEXT, arena + ARENA_START, arena + ARENA_SIZE);
    let word = MemArg {
        offset: 0,
        align: 2,
        memory_index: 0,
    };
    let at = |address: u32| Instruction::I32Const(address as i32);
    let p = 4;
    let mut f = Function::new([(1, wasm_encoder::ValType::I32)]);
    for instruction in [
        // The adapter never reallocates: anything else is not the adapter.
        Instruction::LocalGet(0),
        Instruction::If(wasm_encoder::BlockType::Empty),
        Instruction::Unreachable,
        Instruction::End,
        at(next),
        Instruction::I32Load(word),
        Instruction::LocalTee(p),
        Instruction::I32Eqz,
        Instruction::If(wasm_encoder::BlockType::Empty),
        at(start),
        Instruction::LocalSet(p),
        Instruction::End,
        // Round up to the alignment asked for.
        Instruction::LocalGet(p),
        Instruction::LocalGet(2),
        Instruction::I32Add,
        Instruction::I32Const(1),
        Instruction::I32Sub,
        Instruction::I32Const(0),
        Instruction::LocalGet(2),
        Instruction::I32Sub,
        Instruction::I32And,
        Instruction::LocalSet(p),
        Instruction::LocalGet(p),
        Instruction::LocalGet(3),
        Instruction::I32Add,
        at(end),
        Instruction::I32GtU,
        Instruction::If(wasm_encoder::BlockType::Empty),
        Instruction::Unreachable,
        Instruction::End,
        at(next),
        Instruction::LocalGet(p),
        Instruction::LocalGet(3),
        Instruction::I32Add,
        Instruction::I32Store(word),
        Instruction::LocalGet(p),
        Instruction::End,
    ] {
        f.instruction(&instruction);
    }
    f
}

/// A module wasmparser cannot read, as wasmparser says.
fn unreadable(error: wasmparser::BinaryReaderError) -> Error {
    Error::Componentize(error.to_string())
}

fn leb(bytes: &[u8]) -> Result<u32, Error> {
    wasmparser::BinaryReader::new(bytes, 0)
        .read_var_u32()
        .map_err(unreadable)
}

fn leb_len(bytes: &[u8]) -> usize {
    bytes.iter().position(|b| b & 0x80 == 0).map_or(bytes.len(), |i| i + 1)
}

fn leb_bytes(value: u32) -> Vec<u8> {
    let mut out = Vec::new();
    value.encode(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module_with_arena(copies: usize) -> Vec<u8> {
        let mut data = String::new();
        for i in 0..copies {
            data.push_str(&format!(
                "(data (i32.const {}) \"orkestra:adapter-arena/1\")",
                1024 + i * (ARENA_SIZE as usize + 64)
            ));
        }
        wat::parse_str(format!(
            "(module (type (func)) (import \"x\" \"f\" (func)) (memory (export \"memory\") 16) (func $g) (export \"g\" (func $g)) {data})"
        ))
        .unwrap()
    }

    #[test]
    fn the_arena_realloc_is_added_after_the_module_s_own_functions() {
        let out = with_adapter_realloc(&module_with_arena(1), 1024).unwrap();
        wasmparser::Validator::new().validate_all(&out).expect("valid");
        let exports: Vec<(String, u32)> = Parser::new(0)
            .parse_all(&out)
            .filter_map(|p| match p.unwrap() {
                Payload::ExportSection(r) => Some(
                    r.into_iter()
                        .map(|e| e.unwrap())
                        .map(|e| (e.name.to_string(), e.index))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        // One import, one defined function: the allocator is function 2.
        assert!(exports.contains(&(ADAPTER_REALLOC.to_string(), 2)), "{exports:?}");
        assert!(exports.contains(&("g".to_string(), 1)), "{exports:?}");
    }

    #[test]
    fn the_arena_is_found_once_or_refused() {
        assert_eq!(find_arena(&module_with_arena(1)).unwrap(), Some(1024));
        assert_eq!(find_arena(&module_with_arena(0)).unwrap(), None);
        let twice = find_arena(&module_with_arena(2)).unwrap_err();
        assert!(twice.to_string().contains("2 times"), "{twice}");
    }

    #[test]
    fn a_module_without_the_world_s_exports_is_refused_by_name() {
        let module = wat::parse_str("(module (memory (export \"memory\") 1))").unwrap();
        let error = new_component(&module, World::Constructor).unwrap_err();
        assert!(error.to_string().contains("reconcile"), "{error}");
    }

    #[test]
    fn a_component_or_other_bytes_are_refused() {
        assert_eq!(
            new_component(b"not wasm", World::Hook).unwrap_err().to_string(),
            "not a WebAssembly module"
        );
        let component = wat::parse_str("(component)").unwrap();
        assert_eq!(
            new_component(&component, World::Hook).unwrap_err().to_string(),
            "already a component"
        );
    }
}
