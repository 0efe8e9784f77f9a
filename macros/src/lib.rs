//! The attribute macros of [hwsched](https://docs.rs/hwsched):
//! `#[hwsched::main]` and `#[hwsched::test]`.
//!
//! Use them through hwsched (its `macros` feature, on by default), as
//! `#[hwsched::main]` and `#[hwsched::test]`; the expansion refers to the
//! runtime as `::hwsched` (or the path given by the `crate` option), so this
//! crate is of no use alone.
//!
//! Both turn an `async fn` into a plain `fn` that builds a
//! [`hwsched::Runtime`](https://docs.rs/hwsched/latest/hwsched/struct.Runtime.html)
//! with the options given and runs the function's body on it with
//! `Runtime::block_on`. They accept the same options:
//!
//! | option | value | builder call |
//! | --- | --- | --- |
//! | `worker_threads` | an integer literal, at least 1 | `.worker_threads(n)` |
//! | `topology` | a string: an hwloc synthetic description (`"pack:2 core:4 pu:2"`), or a path ending in `.xml` | `.topology(TopologySource::Synthetic(..))`, or `TopologySource::Xml(..)` |
//! | `crate` | a string: the path to hwsched, where it is re-exported | (the expansion's `::hwsched`) |
//!
//! Options left out keep the [`Builder`]'s defaults (every allowed PU of
//! this machine, pinned). Input the macros cannot use (an unknown option,
//! a bad value, a function that is not `async` or is generic) is a compile
//! error naming it, at its place in the source.
//!
//! [`Builder`]: https://docs.rs/hwsched/latest/hwsched/struct.Builder.html
#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Delimiter, Group, Span, TokenStream as TokenStream2, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Generics, Lit, LitInt, LitStr, Meta, ReturnType, Token, Type};

/// Runs an `async fn main` on a new hwsched runtime.
///
/// ```
/// #[hwsched::main(worker_threads = 2)]
/// async fn main() {
///     let h = hwsched::spawn(async { 40 + 2 });
///     assert_eq!(h.await.unwrap(), 42);
///     assert_eq!(hwsched::Handle::current().stats().workers.len(), 2);
/// }
/// ```
///
/// expands to (give or take the paths)
///
/// ```
/// fn main() {
///     let body = async move {
///         let h = hwsched::spawn(async { 40 + 2 });
///         assert_eq!(h.await.unwrap(), 42);
///         assert_eq!(hwsched::Handle::current().stats().workers.len(), 2);
///     };
///     let rt = match hwsched::Runtime::builder().worker_threads(2).build() {
///         Ok(rt) => rt,
///         Err(e) => panic!("#[hwsched::main] could not build the runtime: {e}"),
///     };
///     rt.block_on(body)
/// }
/// ```
///
/// The body is not changed: it runs inside `Runtime::block_on` on the
/// thread that calls `main`, and [`hwsched::spawn`] and
/// `hwsched::Handle::current()` work in it. The runtime is dropped (its
/// workers stopped and joined, its unfinished tasks dropped) when the body
/// returns, before `main` returns.
///
/// # Options
///
/// - `worker_threads = N`: the number of workers, an integer literal of at
///   least 1 (`Builder::worker_threads`). Default: one per allowed PU of
///   the topology.
/// - `topology = "..."`: where the topology comes from
///   (`Builder::topology`). A string ending in `.xml` is the path of an
///   `lstopo file.xml` export (`TopologySource::Xml`; a relative path is
///   relative to the working directory when the program runs); any other
///   string is an hwloc synthetic description such as
///   `"pack:2 l3:2 core:4 pu:2"` (`TopologySource::Synthetic`). Default:
///   this machine (`TopologySource::System`). Synthetic and XML workers are
///   not pinned.
/// - `crate = "path"`: the path to hwsched, for code that reaches it
///   through a re-export rather than as the `hwsched` dependency. Default:
///   `::hwsched`.
///
/// ```
/// #[hwsched::main(topology = "pack:2 l3:2 core:4 pu:2", worker_threads = 8)]
/// async fn main() {
///     let stats = hwsched::Handle::current().stats();
///     assert_eq!(stats.workers.len(), 8);
/// }
/// ```
///
/// ```no_run
/// // A machine exported with `lstopo machine.xml`.
/// #[hwsched::main(topology = "machine.xml")]
/// async fn main() {}
/// ```
///
/// ```
/// mod runtime {
///     pub use ::hwsched as rt;
/// }
///
/// #[hwsched::main(crate = "runtime::rt", worker_threads = 1)]
/// async fn main() {}
/// ```
///
/// # Returning a `Result`
///
/// `main` may return what a plain `main` may (anything that implements
/// `std::process::Termination`), and the body may use `?`:
///
/// ```
/// #[hwsched::main(worker_threads = 1)]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let n: u32 = "42".parse()?;
///     let doubled = hwsched::spawn(async move { n * 2 }).await?;
///     assert_eq!(doubled, 84);
///     Ok(())
/// }
/// ```
///
/// # Panics
///
/// When the runtime cannot be built, `main` panics with the
/// `BuildError`'s message (as tokio's macro does with
/// `.expect("Failed building the Runtime")`): the options are checked when
/// the program is compiled only as far as they can be without the machine,
/// so a topology hwloc refuses, an XML file that is missing, or more
/// workers than the topology has PUs, is a panic when it runs:
///
/// ```should_panic
/// // "#[hwsched::main] could not build the runtime: worker_threads(64): the
/// // topology has only 16 allowed PUs"
/// #[hwsched::main(topology = "pack:2 core:4 pu:2", worker_threads = 64)]
/// async fn main() {}
/// ```
///
/// A panic in the body propagates out of `main`, as it would from a plain
/// `main`. Use [`Builder`] instead where the options come from the command
/// line or the environment, or when the program needs the runtime after
/// the body (its `stats()`, `shutdown_timeout`).
///
/// # Errors
///
/// At compile time, with the offending token underlined: an option other
/// than the three above, a `worker_threads` that is not an integer literal
/// or is 0, a `topology` or `crate` that is not a string (or `crate` not a
/// path), an option given twice, a function that is not `async`, is
/// `const`, `unsafe` or `extern`, is generic, or is named `main` and takes
/// arguments.
///
/// ```compile_fail
/// #[hwsched::main(workers = 2)] // unknown option `workers`
/// async fn main() {}
/// ```
///
/// ```compile_fail
/// #[hwsched::main(worker_threads = "2")] // not an integer literal
/// async fn main() {}
/// ```
///
/// ```compile_fail
/// #[hwsched::main(worker_threads = 0)] // a runtime needs a worker
/// async fn main() {}
/// ```
///
/// ```compile_fail
/// #[hwsched::main]
/// fn main() {} // not async
/// ```
///
/// ```compile_fail
/// #[hwsched::main]
/// async fn main(args: Vec<String>) {} // main takes no arguments
/// ```
///
/// ```compile_fail
/// #[hwsched::main(topology = 4)] // not a string
/// async fn main() {}
/// ```
///
/// [`hwsched::spawn`]: https://docs.rs/hwsched/latest/hwsched/fn.spawn.html
/// [`Builder`]: https://docs.rs/hwsched/latest/hwsched/struct.Builder.html
// The expansion shown above is a `fn main` that rustdoc could have written.
#[allow(clippy::needless_doctest_main)]
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Main, args.into(), item.into()).into()
}

/// Runs an `async fn` test on a new hwsched runtime: `#[test]` for async
/// code.
///
/// ```
/// #[hwsched::test(worker_threads = 2)]
/// async fn two_workers_add() {
///     let h = hwsched::spawn(async { 40 + 2 });
///     assert_eq!(h.await.unwrap(), 42);
/// }
/// # fn main() {}
/// ```
///
/// expands to a `#[test]` function that builds a runtime with the options,
/// runs the body with `Runtime::block_on`, and drops the runtime: each test
/// gets a fresh runtime of its own, and tests that run in parallel do not
/// share workers. Other attributes stay on the function
/// (`#[should_panic]`, `#[ignore]`); `#[test]` must not be given as well.
///
/// The options are those of [`macro@main`]: `worker_threads = N`,
/// `topology = "..."` (a synthetic description, or a path ending in
/// `.xml`: relative paths are relative to the working directory of the
/// test, the package's root under `cargo test`) and `crate = "path"`.
/// Without `worker_threads`, a test's runtime has a worker per allowed PU,
/// as `Builder::new()` does: give a small count where many tests run at
/// once.
///
/// ```
/// #[hwsched::test(topology = "pack:2 l3:2 core:4 pu:2")]
/// async fn thirty_two_synthetic_workers() {
///     assert_eq!(hwsched::Handle::current().stats().workers.len(), 32);
/// }
///
/// #[hwsched::test(worker_threads = 1)]
/// async fn returns_a_result() -> Result<(), std::num::ParseIntError> {
///     let n: u32 = "7".parse()?;
///     assert_eq!(n, 7);
///     Ok(())
/// }
///
/// #[hwsched::test(worker_threads = 1)]
/// #[should_panic(expected = "boom")]
/// async fn a_panic_fails_the_test() {
///     panic!("boom");
/// }
/// # fn main() {}
/// ```
///
/// # Panics
///
/// The test panics (fails) when its runtime cannot be built, with the
/// `BuildError`'s message after `#[hwsched::test] could not build the
/// runtime: `, and when its body panics.
///
/// # Errors
///
/// Those of [`macro@main`], and a test function that takes arguments.
///
/// ```compile_fail
/// #[hwsched::test(worker_threads = 1)]
/// async fn t<T: Default>() {} // generic
/// # fn main() {}
/// ```
///
/// ```compile_fail
/// #[hwsched::test(worker_threads = 1)]
/// async fn t(n: u32) {} // a test takes no arguments
/// # fn main() {}
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Test, args.into(), item.into()).into()
}

/// Which attribute is expanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Main => "hwsched::main",
            Kind::Test => "hwsched::test",
        }
    }
}

/// The options of the attribute, as far as they are valid.
#[derive(Default)]
struct Options {
    workers: Option<LitInt>,
    topology: Option<Topology>,
    krate: Option<syn::Path>,
}

enum Topology {
    Synthetic(LitStr),
    Xml(LitStr),
}

/// The function the attribute is on.
struct AsyncFn {
    attrs: Vec<Attribute>,
    vis: syn::Visibility,
    ident: syn::Ident,
    params: Group,
    output: ReturnType,
    where_clause: Option<syn::WhereClause>,
    body: Group,
}

/// The expansion: the function, or the errors (each at its place) followed
/// by what can still be expanded, so that one mistake does not bring others
/// ("`main` function not found") with it.
fn expand(kind: Kind, args: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let (opts, opt_errors) = parse_options(kind, args);
    let f = match (|input: ParseStream| parse_fn(kind, input)).parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            // The function as written, so that its own errors are reported
            // and the names it defines exist.
            let errors = opt_errors.map(|mut o| {
                o.combine(e.clone());
                o
            });
            let errors = errors.unwrap_or(e).to_compile_error();
            return quote! { #errors #item };
        }
    };
    let errors = opt_errors.map(|e| e.to_compile_error());
    let expanded = expand_fn(kind, &opts, f);
    quote! { #errors #expanded }
}

/// Parses `key = value, ...`; returns the valid options and the errors.
fn parse_options(kind: Kind, args: TokenStream2) -> (Options, Option<syn::Error>) {
    let mut opts = Options::default();
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args) {
        Ok(m) => m,
        Err(e) => {
            push(e);
            return (opts, errors);
        }
    };
    let mut seen: Vec<String> = Vec::new();
    let expected = "expected `worker_threads = N`, `topology = \"...\"` or `crate = \"...\"`";
    for meta in metas {
        let nv = match meta {
            Meta::NameValue(nv) => nv,
            other => {
                let path = other.path();
                let key = path_string(path);
                let msg = if is_key(&key) {
                    format!("`{key}` needs a value: `{key} = ...`")
                } else {
                    format!("unknown option `{key}` of `#[{}]`: {expected}", kind.name())
                };
                push(syn::Error::new_spanned(other, msg));
                continue;
            }
        };
        let key = path_string(&nv.path);
        let value = unwrap_group(&nv.value);
        if is_key(&key) && seen.contains(&key) {
            push(syn::Error::new_spanned(
                &nv.path,
                format!("`{key}` is given twice: keep one"),
            ));
            continue;
        }
        seen.push(key.clone());
        match key.as_str() {
            "worker_threads" => match worker_threads(value) {
                Ok(n) => opts.workers = Some(n),
                Err(e) => push(e),
            },
            "topology" => match topology(value) {
                Ok(t) => opts.topology = Some(t),
                Err(e) => push(e),
            },
            "crate" => match crate_path(value) {
                Ok(p) => opts.krate = Some(p),
                Err(e) => push(e),
            },
            _ => push(syn::Error::new_spanned(
                &nv.path,
                format!("unknown option `{key}` of `#[{}]`: {expected}", kind.name()),
            )),
        }
    }
    (opts, errors)
}

fn is_key(key: &str) -> bool {
    matches!(key, "worker_threads" | "topology" | "crate")
}

fn path_string(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// The expression inside the invisible groups that `macro_rules!` wraps
/// around a `$v:expr` or `$v:literal` it passes on.
fn unwrap_group(mut e: &Expr) -> &Expr {
    while let Expr::Group(g) = e {
        e = &g.expr;
    }
    e
}

/// Source text of a value, for messages.
fn shown(e: &Expr) -> String {
    e.to_token_stream().to_string()
}

/// `worker_threads = N`: an integer literal of at least 1, unsuffixed or
/// `usize`; re-made unsuffixed.
fn worker_threads(value: &Expr) -> syn::Result<LitInt> {
    let not_a_count = || {
        syn::Error::new_spanned(
            value,
            format!(
                "`worker_threads = {}`: expected an integer literal of at least 1, such as \
                 `worker_threads = 4`",
                shown(value)
            ),
        )
    };
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(lit), ..
    }) = value
    else {
        return Err(not_a_count());
    };
    if lit.base10_digits().starts_with('-') {
        return Err(not_a_count());
    }
    if !matches!(lit.suffix(), "" | "usize") {
        return Err(syn::Error::new_spanned(
            lit,
            format!("`worker_threads = {lit}`: the count is a `usize`; write it without a suffix"),
        ));
    }
    match lit.base10_parse::<usize>() {
        Ok(0) => Err(syn::Error::new_spanned(
            lit,
            "`worker_threads = 0`: a runtime needs at least one worker",
        )),
        Ok(n) => Ok(LitInt::new(&n.to_string(), lit.span())),
        Err(e) => Err(syn::Error::new_spanned(
            lit,
            format!("`worker_threads = {lit}`: {e}"),
        )),
    }
}

/// `topology = "..."`: a path ending in `.xml`, or a synthetic description.
fn topology(value: &Expr) -> syn::Result<Topology> {
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(s), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`topology = {}`: expected a string: an hwloc synthetic description such as \
                 \"pack:2 core:4 pu:2\", or the path of an XML export ending in `.xml`",
                shown(value)
            ),
        ));
    };
    let v = s.value();
    if v.trim().is_empty() {
        return Err(syn::Error::new_spanned(
            s,
            "`topology = \"\"`: expected an hwloc synthetic description such as \
             \"pack:2 core:4 pu:2\", or the path of an XML export ending in `.xml`; leave the \
             option out for this machine's topology",
        ));
    }
    let lit = LitStr::new(&v, s.span());
    Ok(if v.ends_with(".xml") {
        Topology::Xml(lit)
    } else {
        Topology::Synthetic(lit)
    })
}

/// `crate = "path"`.
fn crate_path(value: &Expr) -> syn::Result<syn::Path> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => s.parse::<syn::Path>().map_err(|_| {
            syn::Error::new_spanned(
                s,
                format!(
                    "`crate = {}`: expected the path to hwsched, such as `crate = \"my_lib::hwsched\"`",
                    s.to_token_stream()
                ),
            )
        }),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "`crate = {}`: expected a string holding the path to hwsched, such as \
                 `crate = \"my_lib::hwsched\"`",
                shown(other)
            ),
        )),
    }
}

/// Parses `#[attrs] vis async fn name(params) -> output where .. { body }`.
fn parse_fn(kind: Kind, input: ParseStream) -> syn::Result<AsyncFn> {
    let attrs = Attribute::parse_outer(input)?;
    if kind == Kind::Test {
        if let Some(a) = attrs
            .iter()
            .find(|a| a.path().segments.last().is_some_and(|s| s.ident == "test"))
        {
            return Err(syn::Error::new_spanned(
                a,
                format!(
                    "`#[{}]` already makes the function a test: remove `{}`",
                    kind.name(),
                    a.to_token_stream()
                ),
            ));
        }
    }
    let vis: syn::Visibility = input.parse()?;
    let mut asyncness = false;
    loop {
        if input.peek(Token![async]) {
            input.parse::<Token![async]>()?;
            asyncness = true;
        } else if input.peek(Token![fn]) {
            break;
        } else if input.peek(Token![const])
            || input.peek(Token![unsafe])
            || input.peek(Token![extern])
        {
            let tt: TokenTree = input.parse()?;
            return Err(syn::Error::new_spanned(
                &tt,
                format!(
                    "`#[{}]` takes a plain `async fn`: remove `{tt}`",
                    kind.name()
                ),
            ));
        } else {
            return Err(input.error(format!("`#[{}]` takes an `async fn`", kind.name())));
        }
    }
    let fn_token: Token![fn] = input.parse()?;
    if !asyncness {
        return Err(syn::Error::new_spanned(
            fn_token,
            format!(
                "the `async` keyword is missing from the function declaration: `#[{}]` takes an \
                 `async fn`",
                kind.name()
            ),
        ));
    }
    let ident: syn::Ident = input.parse()?;
    if input.peek(Token![<]) {
        let generics: Generics = input.parse()?;
        return Err(syn::Error::new_spanned(
            &generics,
            format!(
                "`#[{}]` cannot be used on a generic function: remove the generic parameters",
                kind.name(),
            ),
        ));
    }
    let params: Group = input.parse()?;
    if params.delimiter() != Delimiter::Parenthesis {
        return Err(syn::Error::new(
            params.span(),
            "expected the function's parameters",
        ));
    }
    if !params.stream().is_empty() {
        let what = match kind {
            Kind::Test => Some("a test function cannot take arguments"),
            Kind::Main if ident == "main" => Some("the `main` function cannot take arguments"),
            Kind::Main => None,
        };
        if let Some(what) = what {
            return Err(syn::Error::new_spanned(
                params.stream(),
                format!("{what}: remove `{}`", params.stream()),
            ));
        }
    }
    let output: ReturnType = input.parse()?;
    let where_clause: Option<syn::WhereClause> = input.parse()?;
    let body: Group = input.parse()?;
    if body.delimiter() != Delimiter::Brace {
        return Err(syn::Error::new(body.span(), "expected the function's body"));
    }
    Ok(AsyncFn {
        attrs,
        vis,
        ident,
        params,
        output,
        where_clause,
        body,
    })
}

/// Splits the inner attributes (`#![allow(..)]`) off the front of a body;
/// they go on the generated function, where they are allowed (not on an
/// `async` block).
fn split_inner_attrs(body: &Group) -> (TokenStream2, Group) {
    let tokens: Vec<TokenTree> = body.stream().into_iter().collect();
    let mut i = 0;
    while let [TokenTree::Punct(hash), TokenTree::Punct(bang), TokenTree::Group(g), ..] =
        &tokens[i..]
    {
        if hash.as_char() == '#' && bang.as_char() == '!' && g.delimiter() == Delimiter::Bracket {
            i += 3;
        } else {
            break;
        }
    }
    let inner: TokenStream2 = tokens[..i].iter().cloned().collect();
    let mut rest = Group::new(Delimiter::Brace, tokens[i..].iter().cloned().collect());
    rest.set_span(body.span());
    (inner, rest)
}

/// The spans of the first and last tokens of the body's last statement (or
/// of its braces when it is empty): a type error in the value the body
/// returns is reported there.
fn last_statement_spans(body: &Group) -> (Span, Span) {
    let tokens: Vec<TokenTree> = body.stream().into_iter().collect();
    let is_semi = |t: &TokenTree| matches!(t, TokenTree::Punct(p) if p.as_char() == ';');
    let Some(last) = tokens.last() else {
        return (body.span(), body.span());
    };
    let end = tokens.len() - usize::from(is_semi(last));
    let start = tokens[..end]
        .iter()
        .rposition(is_semi)
        .map_or(0, |i| i + 1)
        .min(tokens.len() - 1);
    (tokens[start].span(), last.span())
}

/// Whether `ty` is `!` or holds an `impl Trait` (neither can be named as a
/// future's `Output`).
fn unnameable(ty: &Type) -> bool {
    fn has_impl(ts: TokenStream2) -> bool {
        ts.into_iter().any(|t| match t {
            TokenTree::Ident(i) => i == "impl",
            TokenTree::Group(g) => has_impl(g.stream()),
            _ => false,
        })
    }
    matches!(ty, Type::Never(_)) || has_impl(ty.to_token_stream())
}

fn expand_fn(kind: Kind, opts: &Options, f: AsyncFn) -> TokenStream2 {
    let AsyncFn {
        attrs,
        vis,
        ident,
        params,
        output,
        where_clause,
        body,
    } = f;
    let (inner_attrs, body) = split_inner_attrs(&body);
    let (last_start, last_end) = last_statement_spans(&body);

    let krate = match &opts.krate {
        Some(p) => p.to_token_stream(),
        None => quote! { ::hwsched },
    };
    let mut builder = quote! { #krate::Runtime::builder() };
    if let Some(n) = &opts.workers {
        builder = quote! { #builder.worker_threads(#n) };
    }
    match &opts.topology {
        Some(Topology::Synthetic(s)) => {
            builder = quote! {
                #builder.topology(#krate::TopologySource::Synthetic(
                    ::std::string::String::from(#s)
                ))
            };
        }
        Some(Topology::Xml(s)) => {
            builder = quote! {
                #builder.topology(#krate::TopologySource::Xml(::std::path::PathBuf::from(#s)))
            };
        }
        None => {}
    }
    let message = format!("#[{}] could not build the runtime: {{}}", kind.name());
    let runtime = quote! {
        match #builder.build() {
            ::core::result::Result::Ok(rt) => rt,
            ::core::result::Result::Err(e) => ::core::panic!(#message, e),
        }
    };

    let output_type = match &output {
        ReturnType::Default => Some(quote! { () }),
        ReturnType::Type(_, ty) if unnameable(ty) => None,
        ReturnType::Type(_, ty) => Some(ty.to_token_stream()),
    };
    // The future's output is checked against the return type where the
    // body's last statement is, so that a mismatch is reported there and
    // `?` in the body knows its error type. A test's future is pinned and
    // used as a `dyn Future`: one `block_on` for all the tests of a crate
    // that return the same type, rather than one per test.
    let typed = match (kind, output_type) {
        (Kind::Main, Some(out)) => quote_spanned! {last_start=>
            if false {
                let _: &dyn ::core::future::Future<Output = #out> = &body;
            }
        },
        (Kind::Test, Some(out)) => quote_spanned! {last_start=>
            let body: ::core::pin::Pin<&mut dyn ::core::future::Future<Output = #out>> =
                ::core::pin::pin!(body);
        },
        (_, None) => quote! {},
    };
    let run = quote_spanned! {last_end=> rt.block_on(body) };
    let test_attr = match kind {
        Kind::Test => quote! { #[::core::prelude::v1::test] },
        Kind::Main => quote! {},
    };
    quote! {
        #test_attr
        #(#attrs)*
        #vis fn #ident #params #output #where_clause {
            #inner_attrs
            let body = async move #body;
            #typed
            let rt = #runtime;
            #run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{expand, Kind, LitStr, TokenStream2, TokenTree};

    fn expand_str(kind: Kind, args: &str, item: &str) -> String {
        expand(kind, args.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    /// The messages of the `compile_error!`s of an expansion.
    fn errors(kind: Kind, args: &str, item: &str) -> Vec<String> {
        let out: TokenStream2 = expand(kind, args.parse().unwrap(), item.parse().unwrap());
        let mut found = Vec::new();
        let tokens: Vec<TokenTree> = out.into_iter().collect();
        for w in tokens.windows(3) {
            if let [TokenTree::Ident(i), TokenTree::Punct(_), TokenTree::Group(g)] = w {
                if i == "compile_error" {
                    let lit: LitStr = syn::parse2(g.stream()).unwrap();
                    found.push(lit.value());
                }
            }
        }
        found
    }

    const MAIN: &str = "async fn main() {}";

    #[test]
    fn options_become_builder_calls() {
        let out = expand_str(
            Kind::Main,
            "worker_threads = 4, topology = \"pack:2 core:2 pu:1\"",
            MAIN,
        );
        assert!(out.contains(":: hwsched :: Runtime :: builder ()"), "{out}");
        assert!(out.contains(". worker_threads (4)"), "{out}");
        assert!(
            out.contains("TopologySource :: Synthetic (:: std :: string :: String :: from (\"pack:2 core:2 pu:1\"))"),
            "{out}"
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(!out.contains("async fn"), "{out}");
    }

    #[test]
    fn a_path_ending_in_xml_is_an_xml_topology() {
        let out = expand_str(Kind::Main, "topology = \"a/b.xml\"", MAIN);
        assert!(
            out.contains("TopologySource :: Xml (:: std :: path :: PathBuf :: from (\"a/b.xml\"))"),
            "{out}"
        );
    }

    #[test]
    fn crate_replaces_the_path() {
        let out = expand_str(Kind::Main, "crate = \"my::rt\"", MAIN);
        assert!(out.contains("my :: rt :: Runtime :: builder ()"), "{out}");
        assert!(!out.contains(":: hwsched ::"), "{out}");
    }

    #[test]
    fn a_suffixed_count_is_made_plain() {
        let out = expand_str(Kind::Main, "worker_threads = 3usize", MAIN);
        assert!(out.contains(". worker_threads (3)"), "{out}");
    }

    #[test]
    fn test_adds_the_test_attribute_and_keeps_the_others() {
        let out = expand_str(
            Kind::Test,
            "",
            "#[should_panic] async fn t() -> Result<(), String> { Ok(()) }",
        );
        let test = out
            .find("# [:: core :: prelude :: v1 :: test]")
            .expect(&out);
        let panic = out.find("# [should_panic]").expect(&out);
        assert!(test < panic, "{out}");
        assert!(out.contains("fn t () -> Result < () , String >"), "{out}");
        assert!(out.contains("Output = Result < () , String >"), "{out}");
    }

    #[test]
    fn inner_attributes_move_to_the_function() {
        let out = expand_str(
            Kind::Main,
            "",
            "async fn main() { #![allow(unused)] let x = 1; }",
        );
        let attr = out.find("#! [allow (unused)]").expect(&out);
        let block = out.find("async move").expect(&out);
        assert!(attr < block, "{out}");
    }

    #[test]
    fn bad_options_are_named() {
        let cases: &[(&str, &str)] = &[
            ("workers = 2", "unknown option `workers`"),
            ("flavor = \"multi_thread\"", "unknown option `flavor`"),
            ("worker_threads", "`worker_threads` needs a value"),
            ("worker_threads(2)", "`worker_threads` needs a value"),
            (
                "worker_threads = \"2\"",
                "`worker_threads = \"2\"`: expected an integer literal",
            ),
            (
                "worker_threads = n",
                "`worker_threads = n`: expected an integer literal",
            ),
            ("worker_threads = -1", "expected an integer literal"),
            (
                "worker_threads = 0",
                "`worker_threads = 0`: a runtime needs at least one worker",
            ),
            ("worker_threads = 2u8", "`worker_threads = 2u8`"),
            (
                "worker_threads = 99999999999999999999999",
                "`worker_threads = 99999999999999999999999`",
            ),
            (
                "worker_threads = 1, worker_threads = 2",
                "`worker_threads` is given twice",
            ),
            ("topology = 4", "`topology = 4`: expected a string"),
            ("topology = \" \"", "`topology = \"\"`"),
            ("crate = hwsched", "`crate = hwsched`: expected a string"),
            (
                "crate = \"not a path\"",
                "`crate = \"not a path\"`: expected the path",
            ),
        ];
        for (args, want) in cases {
            let errs = errors(Kind::Main, args, MAIN);
            assert_eq!(errs.len(), 1, "{args}: {errs:?}");
            assert!(errs[0].contains(want), "{args}: {errs:?} lacks {want:?}");
        }
    }

    #[test]
    fn every_bad_option_is_reported_and_the_function_still_expands() {
        let out = expand_str(
            Kind::Main,
            "workers = 2, worker_threads = 0, topology = 1",
            MAIN,
        );
        assert_eq!(out.matches("compile_error").count(), 3, "{out}");
        assert!(out.contains("fn main ()"), "{out}");
        assert!(!out.contains("async fn"), "{out}");
    }

    #[test]
    fn an_option_given_twice_is_reported_even_when_the_first_was_bad() {
        let errs = errors(Kind::Main, "worker_threads = 0, worker_threads = 2", MAIN);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("at least one worker"), "{errs:?}");
        assert!(
            errs[1].contains("`worker_threads` is given twice"),
            "{errs:?}"
        );
    }

    #[test]
    fn bad_functions_are_named() {
        let cases: &[(Kind, &str, &str)] = &[
            (Kind::Main, "fn main() {}", "the `async` keyword is missing"),
            (Kind::Test, "fn t() {}", "the `async` keyword is missing"),
            (
                Kind::Main,
                "async fn main<T>() {}",
                "cannot be used on a generic function: remove the generic parameters",
            ),
            (
                Kind::Test,
                "async fn t<'a>() {}",
                "cannot be used on a generic function",
            ),
            (
                Kind::Main,
                "async fn main(x: u32) {}",
                "the `main` function cannot take arguments: remove `x : u32`",
            ),
            (
                Kind::Test,
                "async fn t(x: u32) {}",
                "a test function cannot take arguments",
            ),
            (Kind::Main, "async unsafe fn main() {}", "remove `unsafe`"),
            (Kind::Main, "const fn main() {}", "remove `const`"),
            (Kind::Test, "#[test] async fn t() {}", "remove `# [test]`"),
            (
                Kind::Main,
                "struct S;",
                "`#[hwsched::main]` takes an `async fn`",
            ),
        ];
        for (kind, item, want) in cases {
            let errs = errors(*kind, "", item);
            assert_eq!(errs.len(), 1, "{item}: {errs:?}");
            assert!(errs[0].contains(want), "{item}: {errs:?} lacks {want:?}");
        }
    }

    #[test]
    fn a_function_not_named_main_may_take_arguments() {
        let out = expand_str(Kind::Main, "", "async fn run(n: u32) -> u32 { n }");
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("fn run (n : u32) -> u32"), "{out}");
    }

    #[test]
    fn an_impl_trait_output_is_not_named() {
        let out = expand_str(
            Kind::Main,
            "",
            "async fn main() -> impl std::process::Termination {}",
        );
        assert!(!out.contains("dyn"), "{out}");
    }
}
