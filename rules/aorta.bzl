"""Buck2 rules for aorta recipes.

`aorta_recipe` is one target per recipe. Given the recipe's `cells` and `trials`, its analysis
declares one action per trial: a `ctx.actions.run` of `aorta trial exec` with the recipe, its
registries, the command's sources and the environment snapshot as declared inputs, so Buck2's
action cache and remote execution apply per trial. `buck2 build //recipes:x` builds every trial
(the trial directories are the default outputs); the sub-targets `//recipes:x[<cell>]` and
`//recipes:x[<cell>/<index>]` build one cell or one trial; `buck2 run //recipes:x` runs the whole
matrix with `aorta build`.

The aorta CLI evaluates this same file with a stub of the Buck2 API: the loading phase to
resolve labels (`aorta build //recipes:x`), and the analysis phase in tests. Keep it to plain
Buck2 Starlark: no prelude loads, no type annotations naming Buck2-only types.
"""

def _trial_action(ctx, cell, index):
    out = ctx.actions.declare_output("trials/{}/{}".format(cell, index), dir = True)
    args = [
        ctx.attrs._aorta[RunInfo],
        "trial",
        "exec",
        "--recipe",
        ctx.attrs.recipe,
        "--cell",
        cell,
        "--trial",
        str(index),
        "--out",
        out.as_output(),
    ]
    for mitigations in ctx.attrs.mitigations_files:
        args.extend(["--mitigations-file", mitigations])
    if ctx.attrs.env_snapshot:
        args.extend(["--env-snapshot", ctx.attrs.env_snapshot])
    if ctx.attrs.gpus > 0:
        # Remote execution hands the action a machine of the target's platform
        # (exec_compatible_with); aorta gives the trial that machine's first N devices.
        args.extend(["--gpus", ",".join([str(i) for i in range(ctx.attrs.gpus)])])
    if ctx.attrs.command:
        args.append("--")
        args.extend(ctx.attrs.command)
    ctx.actions.run(
        cmd_args(args, hidden = ctx.attrs.srcs),
        category = "aorta_trial",
        identifier = "{}/{}".format(cell, index),
    )
    return out

def _aorta_recipe_impl(ctx):
    # A small marker output (the label and the files it names) so `buck2 build //recipes:x`
    # always has something to materialize, even without per-trial actions.
    marker = ctx.actions.write(
        ctx.attrs.name + ".aorta-target",
        [str(ctx.label), ctx.attrs.recipe.short_path] + [m.short_path for m in ctx.attrs.mitigations_files],
    )
    trial_outputs = []
    sub_targets = {}
    for cell in ctx.attrs.cells:
        cell_outputs = []
        for index in range(ctx.attrs.trials):
            out = _trial_action(ctx, cell, index)
            cell_outputs.append(out)
            sub_targets["{}/{}".format(cell, index)] = [DefaultInfo(default_output = out)]
        sub_targets[cell] = [DefaultInfo(default_outputs = cell_outputs)]
        trial_outputs.extend(cell_outputs)
    args = [ctx.attrs._aorta[RunInfo], "build", ctx.attrs.recipe]
    for mitigations in ctx.attrs.mitigations_files:
        args.extend(["--mitigations-file", mitigations])
    if ctx.attrs.command:
        args.append("--")
        args.extend(ctx.attrs.command)
    return [
        DefaultInfo(
            default_outputs = [marker] + trial_outputs,
            other_outputs = [ctx.attrs.recipe] + ctx.attrs.mitigations_files,
            sub_targets = sub_targets,
        ),
        RunInfo(args = cmd_args(args, hidden = ctx.attrs.srcs)),
    ]

aorta_recipe = rule(
    impl = _aorta_recipe_impl,
    doc = "An aorta recipe (YAML/JSON) plus optional mitigations files: one action per trial; `buck2 run` builds the whole matrix with aorta.",
    attrs = {
        "cells": attrs.list(attrs.string(), default = [], doc = "The recipe's cell names, as in matrix.md (`none-none`); with `trials`, one action per trial. aorta's tests check the shipped BUCK files against the recipes."),
        "command": attrs.list(attrs.string(), default = [], doc = "For probe recipes: the command each trial runs, relative to the repository root."),
        "env_snapshot": attrs.option(attrs.source(), default = None, doc = "An `aorta env probe` snapshot of the machines the trials run on: keys the trials (and so Buck2's action cache) by that environment."),
        "gpus": attrs.int(default = 0, doc = "GPUs each trial needs (0: a CPU trial)."),
        "labels": attrs.list(attrs.string(), default = [], doc = "Free-form tags, e.g. for filtering."),
        "mitigations_files": attrs.list(attrs.source(), default = [], doc = "Passed as --mitigations-file, in order."),
        "recipe": attrs.source(doc = "The recipe file, relative to the package."),
        "srcs": attrs.list(attrs.source(), default = [], doc = "Files the command reads (launch scripts): declared inputs of every trial action."),
        "trials": attrs.int(default = 0, doc = "The recipe's trials per cell (0: no per-trial actions)."),
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
