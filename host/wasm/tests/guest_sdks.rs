//! Each guest SDK against wit/: what a compiler does not check for us is checked here.
//! - Rust: its bindings are generated from wit/ itself (so the compiler checks the rest).
//! - Go: its hand-written canonical ABI (record offsets and sizes, the flat signatures of
//!   its imports and exports) equals what wit-parser computes for wasm32.
//! - Python: every binding the wrapper names exists in wit/ under componentize-py's names.
//! - JS: every host function the SDK calls is in wit/ (its types are jco's, from wit/, and
//!   `scripts/guests.sh --check` compares them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;
use wit_parser::abi::AbiVariant;
use wit_parser::{Function, Resolve, SizeAlign, Type, TypeDefKind, WorldId, WorldItem};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

struct Wit {
    resolve: Resolve,
    sizes: SizeAlign,
    hook: WorldId,
}

impl Wit {
    fn load() -> Self {
        let mut resolve = Resolve::default();
        let (package, _) = resolve.push_dir(root().join("wit")).expect("wit/ parses");
        let hook = resolve.select_world(&[package], Some("hook")).expect("the hook world");
        let mut sizes = SizeAlign::default();
        sizes.fill(&resolve);
        Self { resolve, sizes, hook }
    }

    /// The named types of interface `name`.
    fn types(&self, interface: &str) -> Vec<(&str, &TypeDefKind)> {
        let id = self.interface(interface);
        self.resolve.interfaces[id]
            .types
            .iter()
            .map(|(name, ty)| (name.as_str(), &self.resolve.types[*ty].kind))
            .collect()
    }

    fn interface(&self, name: &str) -> wit_parser::InterfaceId {
        self.resolve
            .interfaces
            .iter()
            .find(|(_, i)| i.name.as_deref() == Some(name))
            .map(|(id, _)| id)
            .unwrap_or_else(|| panic!("no interface {name} in wit/"))
    }

    fn functions(&self, interface: &str) -> Vec<&Function> {
        self.resolve.interfaces[self.interface(interface)]
            .functions
            .values()
            .collect()
    }

    fn type_named(&self, interface: &str, name: &str) -> Type {
        Type::Id(self.resolve.interfaces[self.interface(interface)].types[name])
    }

    /// Where the payload of a variant-like type with `cases` lies after its discriminant.
    fn payload(&self, ty: &Type) -> usize {
        let Type::Id(id) = ty else {
            panic!("{ty:?} has no payload")
        };
        let (tag, cases): (_, Vec<Option<&Type>>) = match &self.resolve.types[*id].kind {
            TypeDefKind::Variant(v) => (v.tag(), v.cases.iter().map(|c| c.ty.as_ref()).collect()),
            TypeDefKind::Option(t) => (wit_parser::Int::U8, vec![None, Some(t)]),
            TypeDefKind::Result(r) => (wit_parser::Int::U8, vec![r.ok.as_ref(), r.err.as_ref()]),
            other => panic!("{other:?} has no payload"),
        };
        self.sizes.payload_offset(tag, cases).size_wasm32()
    }
}

/// `event-id` → `EventID` (Go's initialism), `api-version` → `ApiVersion`.
fn go_field(name: &str) -> String {
    name.split('-')
        .map(|part| match part {
            "id" => "ID".to_string(),
            _ => {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            }
        })
        .collect()
}

fn camel(name: &str) -> String {
    let upper = pascal(name);
    let mut chars = upper.chars();
    chars
        .next()
        .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn pascal(name: &str) -> String {
    go_field(name).replace("ID", "Id")
}

fn snake(name: &str) -> String {
    name.replace('-', "_")
}

/// The layout constants of the Go SDK as the canonical ABI gives them.
fn go_layout(wit: &Wit) -> BTreeMap<String, usize> {
    let mut want = BTreeMap::new();
    for (name, kind) in wit.types("types") {
        if let TypeDefKind::Record(record) = kind {
            let prefix = camel(name);
            want.insert(
                format!("{prefix}Size"),
                wit.sizes.size(&wit.type_named("types", name)).size_wasm32(),
            );
            for (offset, field) in wit
                .sizes
                .field_offsets(record.fields.iter().map(|f| &f.ty))
                .into_iter()
                .zip(&record.fields)
            {
                want.insert(format!("{prefix}{}", go_field(&field.name)), offset.0.size_wasm32());
            }
        }
    }
    want.insert("stringSize".into(), wit.sizes.size(&Type::String).size_wasm32());
    want.insert(
        "outcomePayload".into(),
        wit.payload(&wit.type_named("types", "outcome")),
    );
    want.insert(
        "kubeErrorPayload".into(),
        wit.payload(&wit.type_named("kube", "kube-error")),
    );
    // The option fields of the request, by what they hold.
    let request = wit.type_named("types", "request");
    let Type::Id(id) = request else { unreachable!() };
    let TypeDefKind::Record(record) = &wit.resolve.types[id].kind else {
        unreachable!()
    };
    for field in &record.fields {
        if let Type::Id(option) = field.ty
            && let TypeDefKind::Option(inner) = &wit.resolve.types[option].kind
        {
            let name = match inner {
                Type::String => "optionString",
                Type::U64 => "optionU64",
                other => panic!("an option<{other:?}> the Go SDK does not read"),
            };
            want.insert(name.into(), wit.payload(&field.ty));
        }
    }
    // Every kube import returns a result<_, kube-error> into one area of the largest size.
    let results: Vec<Type> = wit.functions("kube").iter().filter_map(|f| f.result).collect();
    let sizes: BTreeSet<usize> = results.iter().map(|r| wit.sizes.size(r).size_wasm32()).collect();
    let payloads: BTreeSet<usize> = results.iter().map(|r| wit.payload(r)).collect();
    assert_eq!(
        payloads.len(),
        1,
        "the kube results put their payload at different offsets"
    );
    want.insert("kubeResultSize".into(), *sizes.last().unwrap());
    want.insert("kubeResultOk".into(), *payloads.first().unwrap());
    want
}

#[test]
fn the_go_sdk_lays_records_out_and_signs_functions_as_the_canonical_abi_does() {
    let wit = Wit::load();
    let abi = read("guest-sdk/go/abi.go");
    let block = abi
        .split_once("const (")
        .and_then(|(_, rest)| rest.split_once("\n)"))
        .expect("abi.go declares its layout in one const block")
        .0;
    let constant = Regex::new(r"(?m)^\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(\d+)\s*$").unwrap();
    let written: BTreeMap<String, usize> = constant
        .captures_iter(block)
        .map(|c| (c[1].to_string(), c[2].parse().unwrap()))
        .collect();
    let want = go_layout(&wit);
    assert_eq!(written, want, "guest-sdk/go/abi.go's layout differs from wit/");

    // Imports: one Go parameter per flat core parameter (the return pointer included).
    let import = Regex::new(r"//go:wasmimport orkestra:operator/(\w+)@0\.1\.0 ([\w-]+)\nfunc \w+\(([^)]*)\)").unwrap();
    let mut imported = BTreeMap::new();
    for c in import.captures_iter(&abi) {
        let params = c[3].split(',').filter(|p| !p.trim().is_empty()).count();
        imported.insert(format!("{}/{}", &c[1], &c[2]), params);
    }
    let mut wanted = BTreeMap::new();
    for interface in ["kube", "log"] {
        for function in wit.functions(interface) {
            let signature = wit.resolve.wasm_signature(AbiVariant::GuestImport, function);
            wanted.insert(format!("{interface}/{}", function.name), signature.params.len());
        }
    }
    assert_eq!(imported, wanted, "the Go SDK's imports differ from wit/");

    // Exports: every function of `hooks`, taking and returning one pointer.
    let export =
        Regex::new(r"//go:wasmexport orkestra:operator/hooks@0\.1\.0#([\w-]+)\nfunc \w+\(p uint32\) uint32").unwrap();
    let exported: BTreeSet<String> = export.captures_iter(&abi).map(|c| c[1].to_string()).collect();
    let hooks: BTreeSet<String> = wit.functions("hooks").iter().map(|f| f.name.clone()).collect();
    assert_eq!(exported, hooks, "the Go SDK's exports differ from the hooks interface");
    for function in wit.functions("hooks") {
        let signature = wit.resolve.wasm_signature(AbiVariant::GuestExport, function);
        assert_eq!(
            (signature.params.len(), signature.results.len()),
            (1, 1),
            "{}",
            function.name
        );
        assert!(
            signature.indirect_params && signature.retptr,
            "{}: passed through memory",
            function.name
        );
    }
}

/// componentize-py's names for what wit/ declares, per interface: types, their variant
/// and enum cases, functions, and the keyword arguments of each record.
fn python_names(wit: &Wit, interface: &str) -> (BTreeSet<String>, BTreeMap<String, BTreeSet<String>>) {
    let mut names = BTreeSet::new();
    let mut fields = BTreeMap::new();
    let id = wit.interface(interface);
    for (name, ty) in &wit.resolve.interfaces[id].types {
        let class = pascal(name);
        match &wit.resolve.types[*ty].kind {
            TypeDefKind::Record(record) => {
                fields.insert(class.clone(), record.fields.iter().map(|f| snake(&f.name)).collect());
            }
            TypeDefKind::Variant(variant) => {
                names.extend(variant.cases.iter().map(|c| format!("{class}_{}", pascal(&c.name))));
            }
            TypeDefKind::Enum(e) => {
                names.extend(
                    e.cases
                        .iter()
                        .map(|c| format!("{class}.{}", snake(&c.name).to_uppercase())),
                );
            }
            _ => {}
        }
        names.insert(class);
    }
    names.extend(wit.functions(interface).iter().map(|f| snake(&f.name)));
    (names, fields)
}

#[test]
fn the_python_sdk_names_only_bindings_wit_declares() {
    let wit = Wit::load();
    let wrapper = read("guest-sdk/python/orkestra_guest/__init__.py");
    let mut checked = 0;
    let keyword = Regex::new(r"\b([a-z_]+)=").unwrap();
    for (alias, interface) in [("_types", "types"), ("_kube", "kube"), ("_log", "log")] {
        let (names, fields) = python_names(&wit, interface);
        let used = Regex::new(&format!(r"\b{alias}\.([A-Za-z_]+(?:\.[A-Z_]+)?)")).unwrap();
        for c in used.captures_iter(&wrapper) {
            let name = &c[1];
            assert!(
                names.contains(name),
                "{alias}.{name} is not in wit/'s {interface} interface"
            );
            checked += 1;
        }
        // Keyword arguments of record constructors: `_types.Failure(reason=..., message=...)`.
        let call = Regex::new(&format!(r"\b{alias}\.([A-Z][A-Za-z]*)\(((?:[^()]|\([^()]*\))*)\)")).unwrap();
        for c in call.captures_iter(&wrapper) {
            let Some(known) = fields.get(&c[1]) else { continue };
            for k in keyword.captures_iter(&c[2]) {
                assert!(
                    known.contains(&k[1]),
                    "{alias}.{}({}=...): no such field in wit/",
                    &c[1],
                    &k[1]
                );
                checked += 1;
            }
        }
    }
    // The fields the wrapper reads off a raw request.
    let request: BTreeSet<String> = python_names(&wit, "types").1["Request"].clone();
    for c in Regex::new(r"\braw\.([a-z_]+)").unwrap().captures_iter(&wrapper) {
        assert!(
            request.contains(&c[1]),
            "raw.{} is not a field of wit/'s request",
            &c[1]
        );
        checked += 1;
    }
    // The export class and its methods.
    assert!(
        wrapper.contains("exports.Hooks"),
        "the wrapper implements the hooks export"
    );
    let methods = Regex::new(r#"for name in \(([^)]*)\)"#).unwrap();
    let listed: BTreeSet<String> = methods
        .captures(&wrapper)
        .expect("the wrapper lists the hook methods it bridges")[1]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let hooks: BTreeSet<String> = wit.functions("hooks").iter().map(|f| snake(&f.name)).collect();
    assert_eq!(
        listed, hooks,
        "the wrapper bridges other methods than the hooks interface has"
    );
    assert!(checked > 20, "the wrapper's bindings were not found ({checked})");
}

#[test]
fn the_js_sdk_calls_only_host_functions_wit_declares() {
    let wit = Wit::load();
    let sdk = read("guest-sdk/js/index.js");
    let kube: BTreeSet<String> = wit.functions("kube").iter().map(|f| camel(&f.name)).collect();
    let calls: BTreeSet<String> = Regex::new(r"\bhost\.([A-Za-z]+)\(")
        .unwrap()
        .captures_iter(&sdk)
        .map(|c| c[1].to_string())
        .collect();
    assert!(!calls.is_empty(), "the JS SDK calls no kube function");
    assert!(
        calls.is_subset(&kube),
        "host.{:?} not in wit/'s kube",
        calls.difference(&kube)
    );
    let log: BTreeSet<String> = wit.functions("log").iter().map(|f| camel(&f.name)).collect();
    assert!(log.contains("log") && sdk.contains(r#"import { log as hostLog } from "orkestra:operator/log@0.1.0""#));
    // Its declarations are generated from wit/ and name every function.
    let declared = read("guest-sdk/js/wit/interfaces/orkestra-operator-kube.d.ts");
    for function in &kube {
        let name = if function == "delete" { "_delete" } else { function };
        assert!(
            declared.contains(&format!("function {name}(")),
            "{function} is not declared for JS"
        );
    }
}

#[test]
fn the_rust_sdk_is_generated_from_this_wit_for_both_worlds() {
    let wit = Wit::load();
    let sdk = read("guest-sdk/src/lib.rs");
    let generate = Regex::new(r#"generate!\(\{\s*path: "([^"]+)",\s*world: "([^"]+)""#).unwrap();
    let mut worlds = BTreeSet::new();
    for c in generate.captures_iter(&sdk) {
        let dir = root().join("guest-sdk").join(&c[1]).canonicalize().unwrap();
        assert_eq!(
            dir,
            root().join("wit").canonicalize().unwrap(),
            "the Rust SDK reads another WIT"
        );
        worlds.insert(c[2].trim_start_matches('%').to_string());
    }
    let declared: BTreeSet<String> = wit.resolve.worlds.iter().map(|(_, w)| w.name.clone()).collect();
    assert_eq!(worlds, declared, "the Rust SDK binds other worlds than wit/ declares");
    // Both worlds import the same host interfaces the Go and Python SDKs wrap.
    let imports: Vec<&WorldItem> = wit.resolve.worlds[wit.hook].imports.values().collect();
    assert!(imports.iter().any(|i| matches!(i, WorldItem::Interface { .. })));
}
