//! The `#[tool]` attribute of `toolhost-sdk`.
//!
//! Use it through `toolhost_sdk::tool`; this crate is an implementation
//! detail of the SDK.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, LitStr, Meta, ReturnType, Token};

/// Turns a function into a tool. See `toolhost_sdk::tool` for the documentation.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let options = syn::parse_macro_input!(attr as ToolOptions);
    let function = syn::parse_macro_input!(item as ItemFn);
    expand(options, function)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The options inside `#[tool(...)]`.
#[derive(Default)]
struct ToolOptions {
    name: Option<LitStr>,
    toolset: Option<LitStr>,
    permissions: Vec<LitStr>,
    requires_env: Vec<LitStr>,
    emoji: Option<LitStr>,
    title: Option<LitStr>,
    icons: Vec<LitStr>,
    read_only: bool,
    destructive: bool,
}

impl Parse for ToolOptions {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = ToolOptions::default();
        for meta in Punctuated::<Meta, Token![,]>::parse_terminated(input)? {
            let key = meta
                .path()
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match (key.as_str(), &meta) {
                ("read_only", Meta::Path(_)) => options.read_only = true,
                ("destructive", Meta::Path(_)) => options.destructive = true,
                ("name", Meta::NameValue(nv)) => options.name = Some(string(&nv.value)?),
                ("toolset", Meta::NameValue(nv)) => options.toolset = Some(string(&nv.value)?),
                ("emoji", Meta::NameValue(nv)) => options.emoji = Some(string(&nv.value)?),
                ("title", Meta::NameValue(nv)) => options.title = Some(string(&nv.value)?),
                ("icon", Meta::NameValue(nv)) => options.icons.push(string(&nv.value)?),
                ("permissions", Meta::NameValue(nv)) => options.permissions = strings(&nv.value)?,
                ("requires_env", Meta::NameValue(nv)) => options.requires_env = strings(&nv.value)?,
                _ => {
                    return Err(syn::Error::new_spanned(
                        &meta,
                        "unknown tool option; expected one of: name = \"..\", toolset = \"..\", \
                         title = \"..\", permissions = [\"..\"], requires_env = [\"..\"], \
                         emoji = \"..\", icon = \"..\", read_only, destructive",
                    ));
                }
            }
        }
        if let Some(name) = &options.name {
            check_name(name)?;
        }
        Ok(options)
    }
}

fn string(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        _ => Err(syn::Error::new_spanned(expr, "expected a string literal")),
    }
}

fn strings(expr: &Expr) -> syn::Result<Vec<LitStr>> {
    match expr {
        Expr::Array(array) => array.elems.iter().map(string).collect(),
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected a list of string literals, like [\"file:read\"]",
        )),
    }
}

fn check_name(name: &LitStr) -> syn::Result<()> {
    let value = name.value();
    let valid = (1..=64).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(syn::Error::new_spanned(
            name,
            "tool names must be 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'",
        ))
    }
}

/// Joins the function's `///` lines into the tool description.
fn description(function: &ItemFn) -> syn::Result<String> {
    let mut lines = Vec::new();
    for attr in &function.attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            lines.push(s.value().trim().to_string());
        }
    }
    let text = lines.join("\n").trim().to_string();
    if text.is_empty() {
        return Err(syn::Error::new_spanned(
            &function.sig.ident,
            "a tool needs a doc comment (`/// ...`): it is the description models read",
        ));
    }
    Ok(text)
}

/// The expression of a tool's output schema: the schema of the `Ok` type of
/// its result when that type implements `JsonSchema` and is an object, else
/// `None`. An `impl Trait` result cannot be named, so it has none.
fn output_schema(output: &ReturnType) -> TokenStream2 {
    match output {
        ReturnType::Type(_, ty) if !mentions_impl(quote!(#ty)) => quote! {{
            #[allow(unused_imports)]
            use ::toolhost_sdk::__private::{ProbeNoSchema as _, ProbeSchema as _};
            (&&::toolhost_sdk::__private::Probe::<
                <#ty as ::toolhost_sdk::__private::ToolResult>::Output,
            >::new())
                .output_schema()
        }},
        _ => quote!(None),
    }
}

fn mentions_impl(tokens: TokenStream2) -> bool {
    tokens.into_iter().any(|token| match token {
        proc_macro2::TokenTree::Ident(ident) => ident == "impl",
        proc_macro2::TokenTree::Group(group) => mentions_impl(group.stream()),
        _ => false,
    })
}

fn expand(options: ToolOptions, function: ItemFn) -> syn::Result<TokenStream2> {
    let description = description(&function)?;
    let ident = &function.sig.ident;
    let vis = &function.vis;
    if function.sig.asyncness.is_some() {
        return Err(syn::Error::new_spanned(
            function.sig.asyncness,
            "tools are synchronous functions",
        ));
    }
    if !function.sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &function.sig.generics,
            "tools cannot be generic",
        ));
    }
    if matches!(function.sig.output, ReturnType::Default) {
        return Err(syn::Error::new_spanned(
            &function.sig,
            "a tool returns `Result<T, ToolError>` where `T: Serialize`",
        ));
    }
    let name = match options.name {
        Some(name) => name,
        None => {
            let name = LitStr::new(&ident.to_string(), ident.span());
            check_name(&name)?;
            name
        }
    };
    let toolset = match options.toolset {
        Some(toolset) => quote!(#toolset),
        None => quote!(env!("CARGO_PKG_NAME")),
    };
    let permissions = &options.permissions;
    let requires_env = &options.requires_env;
    let emoji = options.emoji.iter();
    let title = match &options.title {
        Some(title) if title.value().trim().is_empty() => {
            return Err(syn::Error::new_spanned(
                title,
                "a title must not be empty; leave it out to show the name",
            ));
        }
        title => title.iter(),
    };
    let icons = &options.icons;
    let read_only = options.read_only;
    let destructive = options.destructive;
    let output_schema = output_schema(&function.sig.output);

    let (args_type, invoke) = match function.sig.inputs.len() {
        0 => (quote!(::toolhost_sdk::NoArguments), quote!(#ident())),
        1 => match &function.sig.inputs[0] {
            FnArg::Typed(arg) => {
                let ty = &arg.ty;
                (quote!(#ty), quote!(#ident(args)))
            }
            FnArg::Receiver(r) => {
                return Err(syn::Error::new_spanned(r, "a tool is a free function"));
            }
        },
        _ => {
            return Err(syn::Error::new(
                function.sig.inputs.span(),
                "a tool takes at most one argument: a struct that derives Deserialize and JsonSchema",
            ));
        }
    };
    let bind_args = if function.sig.inputs.is_empty() {
        quote!(let _: #args_type = ::toolhost_sdk::__private::parse_arguments(arguments)?;)
    } else {
        quote!(let args: #args_type = ::toolhost_sdk::__private::parse_arguments(arguments)?;)
    };
    let marker_doc = format!("The `{}` tool, for `export_plugin!`.", name.value());

    Ok(quote! {
        #function

        #[doc = #marker_doc]
        #[allow(non_camel_case_types)]
        #vis struct #ident {}

        impl ::toolhost_sdk::Tool for #ident {
            const NAME: &'static str = #name;

            fn spec() -> ::toolhost_sdk::ToolSpec {
                let spec = ::toolhost_sdk::ToolSpec::new(#name, #description)
                    .parameters(::toolhost_sdk::__private::schema_of::<#args_type>())
                    .toolset(#toolset)
                    #(.permission(#permissions))*
                    #(.requires_env(#requires_env))*
                    #(.emoji(#emoji))*
                    #(.title(#title))*
                    #(.icon(::toolhost_sdk::Icon::new(#icons)))*
                    .read_only(#read_only)
                    .destructive(#destructive);
                let output_schema: ::core::option::Option<::std::string::String> = #output_schema;
                match output_schema {
                    ::core::option::Option::Some(schema) => spec.output_schema(schema),
                    ::core::option::Option::None => spec,
                }
            }

            fn call(arguments: &str) -> ::core::result::Result<::toolhost_sdk::ToolOutput, ::toolhost_sdk::ToolError> {
                #bind_args
                ::toolhost_sdk::__private::into_output(#invoke)
            }
        }
    })
}
