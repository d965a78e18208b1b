"""Buck2 rules for aorta recipes.

`aorta_recipe` is a macro. Given the recipe's `cells` and `trials`, it declares one
`<name>.<cell>.<index>` trial target per trial, each a single `ctx.actions.run` of
`aorta trial exec` with the recipe, its registries, the command's sources and the environment
snapshot as declared inputs, so Buck2's action cache and remote execution apply per trial; and the
`<name>` target itself, whose default outputs are all of those trial directories
(`buck2 build //recipes:x`) and which `buck2 run //recipes:x` runs as a whole matrix with
`aorta build`.

The aorta CLI evaluates this same file with a stub of the Buck2 API: the loading phase to
resolve labels (`aorta build //recipes:x`), and the analysis phase in tests. Keep it to plain
Buck2 Starlark: no prelude loads, no type annotations naming Buck2-only types.
"""

def _aorta_trial_impl(ctx):
    out = ctx.actions.declare_output(ctx.attrs.name, dir = True)
    args = [
        ctx.attrs._aorta[RunInfo],
        "trial",
        "exec",
        "--recipe",
        ctx.attrs.recipe,
        "--cell",
        ctx.attrs.cell,
        "--trial",
        str(ctx.attrs.trial),
        "--out",
        out.as_output(),
    ]
    for mitigations in ctx.attrs.mitigations_files:
        args.extend(["--mitigations-file", mitigations])
    if ctx.attrs.env_snapshot:
        args.extend(["--env-snapshot", ctx.attrs.env_snapshot])
    if ctx.attrs.gpus > 0:
        # Remote execution hands the action a machine of the right platform; aorta gives the
        # trial that machine's first N devices.
        args.extend(["--gpus", ",".join([str(i) for i in range(ctx.attrs.gpus)])])
    if ctx.attrs.command:
        args.append("--")
        args.extend(ctx.attrs.command)
    ctx.actions.run(
        cmd_args(args, hidden = ctx.attrs.srcs),
        category = "aorta_trial",
        identifier = ctx.attrs.cell + "/" + str(ctx.attrs.trial),
        # The trial's own store lives in the action's sandbox; Buck2's cache is the cache.
        env = {"AORTA_STORE": ".aorta-action-store"},
    )
    return [DefaultInfo(default_output = out)]

_aorta_trial = rule(
    impl = _aorta_trial_impl,
    doc = "One trial of one cell of an aorta recipe: a single `aorta trial exec` action.",
    attrs = {
        "cell": attrs.string(doc = "The cell's name, as in matrix.md (`none-none`)."),
        "command": attrs.list(attrs.string(), default = [], doc = "For probe recipes: the command the trial runs."),
        "env_snapshot": attrs.option(attrs.source(), default = None, doc = "An `aorta env probe` snapshot: the machine the result is valid for."),
        "gpus": attrs.int(default = 0, doc = "GPUs the trial needs (0: a CPU trial)."),
        "labels": attrs.list(attrs.string(), default = []),
        "mitigations_files": attrs.list(attrs.source(), default = []),
        "recipe": attrs.source(),
        "srcs": attrs.list(attrs.source(), default = [], doc = "Files the command reads (launch scripts): declared inputs."),
        "trial": attrs.int(doc = "The trial index, from 0."),
        "_aorta": attrs.exec_dep(default = "//rules:aorta", providers = [RunInfo]),
    },
)

def _aorta_recipe_impl(ctx):
    # A small marker output (the label and the files it names) so `buck2 build //recipes:x`
    # always has something to materialize; the trials' directories ride along.
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
    trial_outputs = []
    for t in ctx.attrs.trials:
        trial_outputs.extend(t[DefaultInfo].default_outputs)
    return [
        DefaultInfo(
            default_output = marker,
            other_outputs = [ctx.attrs.recipe] + ctx.attrs.mitigations_files + trial_outputs,
        ),
        RunInfo(args = cmd_args(args)),
    ]

_aorta_recipe = rule(
    impl = _aorta_recipe_impl,
    doc = "An aorta recipe (YAML/JSON) plus optional mitigations files; `buck2 run` builds the whole matrix with aorta.",
    attrs = {
        "command": attrs.list(attrs.string(), default = [], doc = "For probe recipes: the command each trial runs, relative to the repository root."),
        "labels": attrs.list(attrs.string(), default = [], doc = "Free-form tags, e.g. for filtering."),
        "mitigations_files": attrs.list(attrs.source(), default = [], doc = "Passed as --mitigations-file, in order."),
        "recipe": attrs.source(doc = "The recipe file, relative to the package."),
        "trials": attrs.list(attrs.dep(), default = [], doc = "The per-trial targets (filled in by the aorta_recipe macro)."),
        # The aorta CLI itself; an exec dep because it runs on the build machine.
        "_aorta": attrs.exec_dep(default = "//rules:aorta", providers = [RunInfo]),
    },
)

def aorta_recipe(
        name,
        recipe,
        command = [],
        labels = [],
        mitigations_files = [],
        cells = [],
        trials = 0,
        srcs = [],
        env_snapshot = None,
        gpus = 0,
        visibility = None,
        exec_compatible_with = None):
    """An aorta recipe target, plus one `<name>.<cell>.<index>` target per trial.

    `cells` (the recipe's cell names) and `trials` (its trial count) must agree with the recipe;
    aorta's tests check the shipped BUCK files. Leave them empty for a recipe target without
    per-trial actions. `visibility` and `exec_compatible_with` go to every target. There is no
    `**kwargs`: a misspelt attribute fails at the call in BUCK.
    """
    kwargs = {}
    if visibility != None:
        kwargs["visibility"] = visibility
    if exec_compatible_with != None:
        kwargs["exec_compatible_with"] = exec_compatible_with
    trial_targets = []
    for cell in cells:
        for index in range(trials):
            trial_name = "{}.{}.{}".format(name, cell, index)
            _aorta_trial(
                name = trial_name,
                recipe = recipe,
                cell = cell,
                trial = index,
                command = command,
                labels = labels,
                mitigations_files = mitigations_files,
                srcs = srcs,
                env_snapshot = env_snapshot,
                gpus = gpus,
                **kwargs
            )
            trial_targets.append(":" + trial_name)
    _aorta_recipe(
        name = name,
        recipe = recipe,
        command = command,
        labels = labels,
        mitigations_files = mitigations_files,
        trials = trial_targets,
        **kwargs
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
