//! The files of a new component project, per language. Every project's hook does the same:
//! it puts the CR's `spec.message` in a ConfigMap and in the status, so `test.sh` checks
//! them alike.

use super::Lang;

/// A project: its files, and what of the SDK tree (`guest-sdk/`) goes where under `sdk/`.
pub struct Project {
    pub files: Vec<(String, String)>,
    pub sdk: Vec<(&'static str, &'static str)>,
}

/// `greeter` → `Greeter`, `my-hook` → `MyHook`.
pub fn kind_of(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

const KATALOG: &str = "# The {name} component's operator: its CRD, and the hook that runs on each of its CRs.
# ./build.sh makes build/{name}.wasm; ./test.sh reconciles samples/cr.yaml with it, offline.
# Against a cluster: ork dev -f katalog.yaml --apply-cr (a local one), or ork run -f katalog.yaml.
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata:
  name: {name}
  description: The {name} component and the CRD it serves.
spec:
  crds:
    {name}:
      apiTypes: {group: example.com, version: v1, kind: {kind}, plural: {plural}}
      crFiles: [samples/cr.yaml]
      operatorBox:
        reconcile:
          hooks:
            component: build/{name}.wasm
            limits: {timeout: 2s, memory: 64Mi}
            capabilities:
              - {apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}
";

const SAMPLE: &str = "apiVersion: example.com/v1
kind: {kind}
metadata:
  name: sample
  namespace: default
spec:
  message: hello from the sample
";

const TEST: &str = "#!/bin/sh
# Builds the component, then reconciles samples/cr.yaml with `ork simulate` (no cluster) and
# checks what the hook made. ORK names the ork binary when it is not on PATH.
set -eu
cd \"$(dirname \"$0\")\"
./build.sh
\"${ORK:-ork}\" simulate -f katalog.yaml --cr samples/cr.yaml > build/simulated.yaml
for wanted in 'renderedBy: {name}' 'message: hello from the sample' 'name: sample-message'; do
  if ! grep -q \"$wanted\" build/simulated.yaml; then
    cat build/simulated.yaml
    echo \"FAIL: no '$wanted' in what ork simulate printed\" >&2
    exit 1
  fi
done
echo 'ok: the sample reconciles (build/simulated.yaml)'
";

const README: &str = "# {name}

An Orkestra-rs hook component in {language}. On each `{kind}` it writes the CR's
`spec.message` into a ConfigMap `<cr>-message` and into the status.

- `./build.sh`: builds `build/{name}.wasm`{needs}.
- `./test.sh`: builds, then reconciles `samples/cr.yaml` with `ork simulate` (no cluster)
  and checks the ConfigMap and the status.
- `ork dev -f katalog.yaml --apply-cr`: the same on a local control plane.
- `ork plan -f katalog.yaml --component {name}=build/{name}.wasm`: what a new build would
  change on the CRs of a cluster, before it runs there.

`sdk/` holds the SDK and the WIT world it was made with.
";

const RUST_CARGO: &str = "[package]
name = \"{name}\"
version = \"0.1.0\"
edition = \"2024\"
publish = false

[lib]
crate-type = [\"cdylib\"]

[dependencies]
orkestra-guest = { path = \"sdk/rust\", features = [\"hook\"] }

[profile.release]
opt-level = \"s\"
lto = true
strip = true

# A project of its own, not part of a workspace around it.
[workspace]
";

const RUST_LIB: &str = "//! The {name} hook: the CR's `spec.message` into a ConfigMap and the status.

use orkestra_guest::{Hook, Request, Resource, Response, export_hook, json};

struct Component;

impl Hook for Component {
    fn on_reconcile(request: Request) -> Response {
        let message = request.spec()[\"message\"].as_str().unwrap_or(\"hello\").to_string();
        let config = Resource::new(\"v1\", \"ConfigMap\", &format!(\"{}-message\", request.name()))
            .field(\"data\", json!({ \"message\": message }));
        Response::ok()
            .resource(config)
            .status(\"message\", message)
            .status(\"renderedBy\", \"{name}\")
    }
}

export_hook!(Component);
";

const RUST_BUILD: &str = "#!/bin/sh
# One command to the component: build/{name}.wasm (needs: rustup target add wasm32-wasip2).
set -eu
cd \"$(dirname \"$0\")\"
# Not quiet: the first build compiles the SDK's dependencies, about a minute.
echo 'building build/{name}.wasm (cargo, release, wasm32-wasip2)' >&2
cargo build --release --target wasm32-wasip2
mkdir -p build
cp target/wasm32-wasip2/release/{crate}.wasm build/{name}.wasm
";

const GO_MOD: &str = "module example.com/{name}

go 1.26

require github.com/orkestra-rs/orkestra-rs/guest-sdk/go v0.1.0

replace github.com/orkestra-rs/orkestra-rs/guest-sdk/go => ./sdk/go
";

const GO_MAIN: &str = "// The {name} hook: the CR's spec.message into a ConfigMap and the status.
package main

import orkestra \"github.com/orkestra-rs/orkestra-rs/guest-sdk/go\"

func onReconcile(request *orkestra.Request) *orkestra.Response {
	message := orkestra.String(request.Spec(), \"message\")
	if message == \"\" {
		message = \"hello\"
	}
	config := orkestra.NewResource(\"v1\", \"ConfigMap\", request.Name()+\"-message\").
		Field(\"data\", map[string]string{\"message\": message})
	return orkestra.Ok().
		Resource(config).
		Status(\"message\", message).
		Status(\"renderedBy\", \"{name}\")
}

func init() {
	orkestra.Export(orkestra.Hooks{OnReconcile: onReconcile})
}

// A reactor: the host calls the exports; main never runs.
func main() {}
";

const GO_BUILD: &str = "#!/bin/sh
# One command to the component: Go's wasip1 module, made a component by ork.
set -eu
cd \"$(dirname \"$0\")\"
mkdir -p build
echo 'building build/{name}.wasm (go, wasip1, then ork component new)' >&2
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/{name}.module.wasm .
\"${ORK:-ork}\" component new build/{name}.module.wasm -o build/{name}.wasm
";

const JS_PACKAGE: &str = "{
  \"name\": \"{name}\",
  \"version\": \"0.1.0\",
  \"private\": true,
  \"type\": \"module\",
  \"scripts\": {
    \"build\": \"tsc -p . && componentize-qjs --wit sdk/wit --world hook --sync --module-root . --js hook.js -o build/{name}.wasm\"
  },
  \"devDependencies\": {
    \"componentize-qjs\": \"0.4.5\",
    \"typescript\": \"7.0.2\"
  }
}
";

const JS_TSCONFIG: &str = "{
  \"compilerOptions\": {
    \"target\": \"es2022\",
    \"module\": \"es2022\",
    \"moduleResolution\": \"bundler\",
    \"strict\": true,
    \"skipLibCheck\": true
  },
  \"files\": [\"hook.ts\"]
}
";

const JS_HOOK: &str = "// The {name} hook: the CR's spec.message into a ConfigMap and the status.

import { Hook, Request, Resource, Response, hooks as exportHooks } from \"./sdk/js/index.js\";

const component: Hook = {
  onReconcile(request: Request): Response {
    const message = String(request.spec.message ?? \"hello\");
    return Response.ok()
      .resource(new Resource(\"v1\", \"ConfigMap\", `${request.name}-message`).field(\"data\", { message }))
      .status(\"message\", message)
      .status(\"renderedBy\", \"{name}\");
  },
};

export const hooks = exportHooks(component);
";

const JS_BUILD: &str = "#!/bin/sh
# One command to the component: TypeScript compiled, then componentize-qjs (QuickJS).
set -eu
cd \"$(dirname \"$0\")\"
mkdir -p build
if [ ! -d node_modules ]; then
  echo 'installing componentize-qjs and TypeScript (npm, first build only)' >&2
  npm install --silent --no-audit --no-fund
fi
echo 'building build/{name}.wasm (tsc, then componentize-qjs)' >&2
npm run --silent build
";

const PYTHON_APP: &str = "\"\"\"The {name} hook: the CR's spec.message into a ConfigMap and the status.\"\"\"

from orkestra_guest import Hook, Request, Resource, Response, hooks


class Component(Hook):
    def on_reconcile(self, request: Request) -> Response:
        message = request.spec.get(\"message\") or \"hello\"
        config = Resource(\"v1\", \"ConfigMap\", f\"{request.name}-message\").field(\"data\", {\"message\": message})
        return Response.ok().resource(config).status(\"message\", message).status(\"renderedBy\", \"{name}\")


Hooks = hooks(Component)
";

const PYTHON_BUILD: &str = "#!/bin/sh
# One command to the component (needs: pip install componentize-py==0.25.1).
set -eu
cd \"$(dirname \"$0\")\"
mkdir -p build
echo 'building build/{name}.wasm (componentize-py)' >&2
componentize-py -d sdk/wit -w hook componentize app -p . -p sdk/python -o build/{name}.wasm
";

/// What a language brings: its name and needs (for the README), its own files, and what of
/// the SDK it copies.
struct Language {
    name: &'static str,
    needs: &'static str,
    files: Vec<(&'static str, &'static str)>,
    sdk: Vec<(&'static str, &'static str)>,
}

/// The project of the component `name` in `lang`.
pub fn project(name: &str, lang: Lang) -> Project {
    let kind = kind_of(name);
    let fill = |text: &str| {
        text.replace("{name}", name)
            .replace("{kind}", &kind)
            .replace("{plural}", &format!("{}s", kind.to_lowercase()))
            .replace("{crate}", &name.replace('-', "_"))
    };
    let language = match lang {
        Lang::Rust => Language {
            name: "Rust",
            needs: " (Rust with the wasm32-wasip2 target)",
            files: vec![
                ("Cargo.toml", RUST_CARGO),
                ("src/lib.rs", RUST_LIB),
                ("build.sh", RUST_BUILD),
            ],
            sdk: vec![("Cargo.toml", "rust/Cargo.toml"), ("src", "rust/src")],
        },
        Lang::Go => Language {
            name: "Go",
            needs: " (Go 1.26 and ork)",
            files: vec![("go.mod", GO_MOD), ("main.go", GO_MAIN), ("build.sh", GO_BUILD)],
            sdk: vec![("go", "go")],
        },
        Lang::Js => Language {
            name: "TypeScript",
            needs: " (Node 20; npm installs componentize-qjs and TypeScript)",
            files: vec![
                ("package.json", JS_PACKAGE),
                ("tsconfig.json", JS_TSCONFIG),
                ("hook.ts", JS_HOOK),
                ("build.sh", JS_BUILD),
            ],
            sdk: vec![("js/index.js", "js/index.js"), ("js/index.d.ts", "js/index.d.ts")],
        },
        Lang::Python => Language {
            name: "Python",
            needs: " (componentize-py 0.25.1)",
            files: vec![("app.py", PYTHON_APP), ("build.sh", PYTHON_BUILD)],
            sdk: vec![("python/orkestra_guest", "python/orkestra_guest")],
        },
    };
    let mut files: Vec<(String, String)> = vec![
        ("katalog.yaml".into(), fill(KATALOG)),
        ("samples/cr.yaml".into(), fill(SAMPLE)),
        ("test.sh".into(), fill(TEST)),
        (
            "README.md".into(),
            fill(README)
                .replace("{language}", language.name)
                .replace("{needs}", language.needs),
        ),
        (
            ".gitignore".into(),
            "build/\ntarget/\nnode_modules/\n__pycache__/\n.ork/\n*.js\n!sdk/**/*.js\n".into(),
        ),
    ];
    files.extend(
        language
            .files
            .into_iter()
            .map(|(file, text)| (file.to_string(), fill(text))),
    );
    Project {
        files,
        sdk: language.sdk,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_kinds_and_every_placeholder_is_filled() {
        assert_eq!(kind_of("greeter"), "Greeter");
        assert_eq!(kind_of("my-hook"), "MyHook");
        for lang in [Lang::Rust, Lang::Go, Lang::Js, Lang::Python] {
            let project = project("my-hook", lang);
            for (file, text) in &project.files {
                for placeholder in ["{name}", "{kind}", "{plural}", "{crate}", "{language}", "{needs}"] {
                    assert!(!text.contains(placeholder), "{placeholder} left in {file} ({lang:?})");
                }
            }
            let katalog = &project.files[0].1;
            assert!(katalog.contains("kind: MyHook, plural: myhooks"), "{katalog}");
        }
    }
}
