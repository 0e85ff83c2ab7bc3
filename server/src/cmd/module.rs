//! MODULE, for a server that loads no modules: LIST answers that none is
//! loaded and HELP as Redis 7.0's; LOAD, LOADEX and UNLOAD follow
//! `enable-module-command` (refused by default, as Redis refuses them) and,
//! where allowed, answer what Redis answers for a module it cannot load or
//! does not have. Clients and tools that look for modules (MODULE LIST)
//! find none, rather than an unknown command.

use super::Ctx;
use crate::resp::Reply;

/// Redis's refusal under `enable-module-command no` (or `local`, from
/// another host).
const NOT_ALLOWED: &str = concat!(
    "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", ",
    "you can run it from a local connection, otherwise you need to set this option in the ",
    "configuration file, and then restart the server."
);

/// MODULE LIST: no module is loaded.
pub fn module_list(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Array(Vec::new())
}

/// MODULE HELP
pub fn module_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    )
}

/// Whether `enable-module-command` lets this client load and unload.
fn allowed(ctx: &Ctx<'_>) -> bool {
    let local = ctx.client.info.addr.is_local();
    ctx.shared.config.read().enable_module_command.allows(local)
}

/// MODULE LOAD path [arg ...] and MODULE LOADEX path [CONFIG name value
/// ...] [ARGS arg ...]: tally loads no modules, so where the command is
/// allowed it fails as Redis's does for a library it cannot load.
pub fn module_load(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if !allowed(ctx) {
        return Reply::error(NOT_ALLOWED);
    }
    tracing::warn!(
        path = %String::from_utf8_lossy(argv[2]),
        "Module failed to load: tally does not load modules"
    );
    Reply::error("ERR Error loading the extension. Please check the server logs.")
}

/// MODULE UNLOAD name: no module of that name (nor any other) is loaded.
pub fn module_unload(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    if !allowed(ctx) {
        return Reply::error(NOT_ALLOWED);
    }
    Reply::error("ERR Error unloading module: no such module with that name")
}
