//! Write Orkestra-rs hooks and constructors in Rust.
//!
//! A component implements one world of the `orkestra:operator` WIT package: a **hook**
//! (called by the declarative reconciler around its templates) or a **constructor** (owns
//! reconcile). Pick it with this crate's `hook` or `constructor` feature, implement [`Hook`]
//! or [`Constructor`], and export it with [`export_hook!`] or [`export_constructor!`]. The
//! custom resource arrives as JSON ([`Request::object`]); you return a [`Response`] with the
//! children, status fields and events the host should apply. The host owns the writes: it
//! stamps owner references and labels and checks every child against the capabilities the
//! Katalog grants the component.
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component.

#[cfg(all(feature = "hook", feature = "constructor"))]
compile_error!("orkestra-guest: enable exactly one of the features `hook` and `constructor`");
#[cfg(not(any(feature = "hook", feature = "constructor")))]
compile_error!("orkestra-guest: enable one of the features `hook` or `constructor`");

/// The generated bindings of the world this build implements (not needed directly).
#[doc(hidden)]
pub mod bindings {
    #[cfg(feature = "hook")]
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "orkestra_guest::bindings",
    });
    #[cfg(all(feature = "constructor", not(feature = "hook")))]
    wit_bindgen::generate!({
        path: "../wit",
        world: "%constructor",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "orkestra_guest::bindings",
    });
}

mod request;
mod response;
mod skim;

pub mod kube;
pub mod log;

pub use request::Request;
pub use response::{Resource, Response};
pub use serde::{self, Deserialize};
pub use serde_json::{self, Value, json};

pub(crate) use bindings::orkestra::operator::types;

/// A hook: called by the declarative reconciler before or after its templates.
pub trait Hook {
    /// Each reconcile of a live custom resource.
    fn on_reconcile(request: Request) -> Response;
    /// Each reconcile while the custom resource is being deleted; `Response::ok()` lets the
    /// finalizer go.
    fn on_delete(_request: Request) -> Response {
        Response::ok()
    }
    /// The custom resource was gone when its turn came; [`Request::object`] is `Null`.
    fn on_not_found(_request: Request) -> Response {
        Response::ok()
    }
}

/// A constructor: owns reconcile entirely; return everything the resource should own.
pub trait Constructor {
    fn reconcile(request: Request) -> Response;
    /// The custom resource is being deleted; owned children are collected by Kubernetes.
    fn finalize(_request: Request) -> Response {
        Response::ok()
    }
}

/// Runs a handler: the request converted in, a panic reported through the host's log
/// before it traps, the response converted out.
#[doc(hidden)]
pub fn __run(request: types::Request, handler: fn(Request) -> Response) -> types::Response {
    static PANIC_HOOK: std::sync::Once = std::sync::Once::new();
    PANIC_HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log::error(&format!("guest panicked: {info}"));
        }));
    });
    handler(Request::from_wit(request)).into_wit()
}

/// Exports a [`Hook`] implementation as the component's `hooks` interface.
#[cfg(feature = "hook")]
#[macro_export]
macro_rules! export_hook {
    ($hook:ty) => {
        const _: () = {
            struct OrkestraHookExport;
            type Wire = $crate::bindings::orkestra::operator::types::Request;
            type WireOut = $crate::bindings::orkestra::operator::types::Response;
            impl $crate::bindings::exports::orkestra::operator::hooks::Guest for OrkestraHookExport {
                fn on_reconcile(request: Wire) -> WireOut {
                    $crate::__run(request, <$hook as $crate::Hook>::on_reconcile)
                }
                fn on_delete(request: Wire) -> WireOut {
                    $crate::__run(request, <$hook as $crate::Hook>::on_delete)
                }
                fn on_not_found(request: Wire) -> WireOut {
                    $crate::__run(request, <$hook as $crate::Hook>::on_not_found)
                }
            }
            $crate::bindings::__export_world!(
                OrkestraHookExport with_types_in $crate::bindings
            );
        };
    };
}

/// Exports a [`Constructor`] implementation as the component's `reconciler` interface.
#[cfg(feature = "constructor")]
#[macro_export]
macro_rules! export_constructor {
    ($constructor:ty) => {
        const _: () = {
            struct OrkestraConstructorExport;
            type Wire = $crate::bindings::orkestra::operator::types::Request;
            type WireOut = $crate::bindings::orkestra::operator::types::Response;
            impl $crate::bindings::exports::orkestra::operator::reconciler::Guest for OrkestraConstructorExport {
                fn reconcile(request: Wire) -> WireOut {
                    $crate::__run(request, <$constructor as $crate::Constructor>::reconcile)
                }
                fn finalize(request: Wire) -> WireOut {
                    $crate::__run(request, <$constructor as $crate::Constructor>::finalize)
                }
            }
            $crate::bindings::__export_world!(
                OrkestraConstructorExport with_types_in $crate::bindings
            );
        };
    };
}
