"""Buck2 rules for aorta recipes.

An aorta recipe as a runnable Buck2 target: `buck2 run //recipes:quickstart` runs the whole
matrix with the aorta binary. The aorta CLI evaluates this same file (with a stub of the Buck2
globals) to resolve labels such as `aorta build //recipes:quickstart`, so keep it to plain Buck2
Starlark: no prelude loads, no type annotations naming Buck2-only types.
"""

def _aorta_recipe_impl(ctx):
    # A small marker output (the label and the files it names) so `buck2 build //recipes:x`
    # has something to materialize; the recipe and mitigations ride along as other_outputs.
    marker = ctx.actions.write(
        ctx.attrs.name + ".aorta-target",
        [str(ctx.label), ctx.attrs.recipe.short_path] + [m.short_path for m in ctx.attrs.mitigations_files],
    )
    args = [ctx.attrs._aorta[RunInfo], "build", ctx.attrs.recipe]
    for mitigations in ctx.attrs.mitigations_files:
        args.extend(["--mitigations-file", mitigations])
    if ctx.attrs.command:
        args.append("--")
        args.extend(ctx.attrs.command)
    return [
        DefaultInfo(
            default_output = marker,
            other_outputs = [ctx.attrs.recipe] + ctx.attrs.mitigations_files,
        ),
        RunInfo(args = cmd_args(args)),
    ]

aorta_recipe = rule(
    impl = _aorta_recipe_impl,
    doc = "An aorta recipe (YAML/JSON) plus optional mitigations files; `buck2 run` builds it with aorta.",
    attrs = {
        "command": attrs.list(attrs.string(), default = [], doc = "For probe recipes: the command each trial runs, relative to the repository root."),
        "labels": attrs.list(attrs.string(), default = [], doc = "Free-form tags, e.g. for filtering."),
        "mitigations_files": attrs.list(attrs.source(), default = [], doc = "Passed as --mitigations-file, in order."),
        "recipe": attrs.source(doc = "The recipe file, relative to the package."),
        # The aorta CLI itself; an exec dep because it runs on the build machine.
        "_aorta": attrs.exec_dep(default = "//rules:aorta", providers = [RunInfo]),
    },
)

def _aorta_tool_impl(ctx):
    return [DefaultInfo(), RunInfo(args = cmd_args(ctx.attrs.binary))]

# The aorta binary as a tool target: a prebuilt `aorta` (PATH lookup by default), so Buck2 does
# not need to know how to build Rust. Point it elsewhere with `-c aorta.binary=/path/to/aorta`.
aorta_tool = rule(
    impl = _aorta_tool_impl,
    doc = "Wraps a prebuilt aorta executable as a runnable tool.",
    attrs = {
        "binary": attrs.string(default = "aorta", doc = "Command or path of the aorta executable."),
    },
)
