"""Report objects: what `certgrad check-vjp` and `certgrad certify NET` found,
as Python values with a readable `repr`.

Owns the reading of the binary's JSON (`--json FILE`) into `VjpReport` (a
backward checked against a forward: verdict, per-input discrepancy, evidence,
probes and failure bound, margins with their sites, branch coverage, where a
refutation was found) and `NetCertificate` (a whole net's ties), and the
parsing of the refuting element out of the certifier's detail line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# "... at a point of scale 8; largest discrepancy 1.234e-1 at da0[1, 0] (true 1.0e0,
#  claimed 2.0e0; relative to max |true| 5.0e-1)"
_PROBE = re.compile(
    r"at a point of scale (?P<scale>[^;]+); largest discrepancy (?P<gap>\S+) at "
    r"da(?P<arg>\d+)(?P<index>\[[^\]]*\]) \(true (?P<true>\S+), claimed (?P<claimed>\S+); "
    r"relative to max \|true\| (?P<rel>[^)]+)\)"
)
_PROBE_SCALE = re.compile(r"at a point of scale (?P<scale>[^;]+);")
# "full Jacobian: ∂y1[0, 2]/∂a0[1, 3] is 1.0e0, the backward map gives 2.0e0 (gap 1.0e0)"
_JAC = re.compile(
    r"full Jacobian: ∂y(?P<out>\d*)(?P<oindex>\[[^\]]*\])/∂a(?P<arg>\d+)(?P<index>\[[^\]]*\]) "
    r"is (?P<true>\S+), the backward map gives (?P<claimed>\S+) \(gap (?P<gap>[^)]+)\)"
)


def _index(text: str) -> tuple[int, ...]:
    inner = text.strip()[1:-1].strip()
    return tuple(int(p) for p in inner.split(",")) if inner else ()


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass
class Refutation:
    """Where the backward departs from the VJP: the input (`name`, its pytree
    path), the element, the true VJP entry and the backward's claim, and the
    point it was found at."""

    name: str
    arg: int
    element: tuple[int, ...] | None
    true: float | None
    claimed: float | None
    gap: float | None
    relative: float | None
    point: str
    detail: str
    #: Exact evidence: u has integer entries up to 2^20, hence large entries.
    exact: bool = False

    def __str__(self) -> str:
        where = f"{self.name}{list(self.element) if self.element is not None else ''}"
        if self.true is not None and self.claimed is not None:
            rel = f", {self.relative:.2e} × the largest |true| entry" if self.relative is not None else ""
            return (
                f"input `{where}`: for a random output cotangent u"
                + (" (integer entries up to 2^20: exact arithmetic)" if self.exact else "")
                + " the true VJP entry (Jᵀu) is "
                f"{self.true:.6g}, the backward gives {self.claimed:.6g} (off by {self.gap:.3g}{rel}), "
                f"at {self.point}"
            )
        return f"input `{self.name}`: {self.detail} (at {self.point})"


def parse_refutation(detail: str, names: list[str], given_point: bool) -> Refutation | None:
    """The refuting element out of check-vjp's detail line; `names[i]` is the
    display name of forward argument i."""

    def name(i: int) -> str:
        return names[i] if i < len(names) else f"a{i}"

    m = _PROBE.search(detail)
    if m:
        arg = int(m["arg"])
        scale = m["scale"].strip()
        return Refutation(
            name=name(arg),
            arg=arg,
            element=_index(m["index"]),
            true=_float(m["true"]),
            claimed=_float(m["claimed"]),
            gap=_float(m["gap"]),
            relative=_float(m["rel"]),
            point="the given point" if given_point else f"a seeded random point of scale {scale}",
            detail=detail,
        )
    m = _JAC.search(detail)
    if m:
        arg = int(m["arg"])
        true, claimed = _float(m["true"]), _float(m["claimed"])
        return Refutation(
            name=name(arg),
            arg=arg,
            element=_index(m["index"]),
            true=true,
            claimed=claimed,
            gap=_float(m["gap"]),
            relative=None,
            point=("the given point" if given_point else "a seeded random point")
            + f" (full Jacobian entry ∂out{m['out']}{m['oindex']}/∂{name(arg)}{m['index']})",
            detail=detail,
        )
    return None


@dataclass
class InputResult:
    """One input (a pytree leaf) of the checked function."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    #: "checked", or why not: "integer: held at its value", "static (Python value)"
    role: str
    probes: int | None = None
    max_rel_discrepancy: float | None = None
    refuted: bool = False

    @property
    def checked(self) -> bool:
        return self.role == "checked"


@dataclass
class SiteMargin:
    """A decision site of the forward (max, compare, select …) and the
    smallest margin any of its decisions had at the certified points."""

    site: str
    op: str
    min: float
    at: int
    decisions: int


@dataclass
class Coverage:
    """Branch coverage of one decision site: how often each outcome was taken,
    and which outcomes never were."""

    site: str
    op: str
    outcome_counts: list[int]
    never_taken: list[str]


class _Verdict:
    """`certified` / `refuted` read from a report's `verdict` string."""

    verdict: str

    @property
    def certified(self) -> bool:
        return self.verdict == "certified"

    @property
    def refuted(self) -> bool:
        return self.verdict == "refuted"


@dataclass
class VjpReport(_Verdict):
    """What the certifier found for one (forward, backward) pair.

    `verdict` is "certified", "refuted" or "undecided"; `inputs` has one row
    per argument leaf (checked ones with probes and the largest relative
    discrepancy of the adjoint identity); `evidence` is "exact" (rational
    arithmetic, equality) or "f64-tol 1e-9" (float64 dual numbers within a
    relative tolerance); `failure_bound` bounds, per point, the probability
    that a wrong input passes every probe (exact evidence only);
    `refutation` says which input, which element, how far and at which point.
    """

    verdict: str
    function: str
    inputs: list[InputResult]
    evidence: str
    probes: int
    points: int
    boundary_points: int
    given_point: bool
    full_jacobian: bool
    failure_bound: float | None
    min_margin: dict | None
    site_margins: list[SiteMargin]
    coverage: list[Coverage]
    kinks_resampled: list[str]
    flat_ties: list[str]
    non_finite_resampled: list[str]
    refutation: Refutation | None
    reason: str | None
    seed: int
    seconds: float
    raw: dict = field(repr=False)
    notes: list[str] = field(default_factory=list)
    forward_text: str | None = field(default=None, repr=False)
    backward_text: str | None = field(default=None, repr=False)

    def __bool__(self) -> bool:  # `assert report` reads as "certified"
        return self.certified

    @classmethod
    def from_json(cls, doc: dict, function: str, names: list[str], leaves: list[InputResult] | None = None):
        """From check-vjp's JSON; `names[i]` names forward argument i; `leaves`
        (optional) are the rows of the caller's inputs, checked ones in
        forward-argument order, others (held, static) anywhere."""
        detail = doc.get("detail") or {}
        refutation = None
        reason = None
        if doc["verdict"] == "refuted":
            refutation = parse_refutation(detail.get("detail", ""), names, doc.get("given_point", False))
            if refutation is None:
                block = detail.get("cotangent", "?")
                arg = int(block[2:]) if block.startswith("da") and block[2:].isdigit() else -1
                refutation = Refutation(
                    name=names[arg] if 0 <= arg < len(names) else block,
                    arg=arg,
                    element=None,
                    true=None,
                    claimed=None,
                    gap=None,
                    relative=None,
                    point="the given point" if doc.get("given_point") else "a seeded random point",
                    detail=detail.get("detail", ""),
                )
            refutation.exact = doc["evidence"] == "exact"
        elif doc["verdict"] == "undecided":
            reason = detail.get("reason")
        by_arg = {row["arg"]: row for row in doc["inputs"]}
        if leaves is None:
            leaves = []
            for row in doc["inputs"]:
                shape, dtype = _parse_type(row["type"])
                leaves.append(
                    InputResult(
                        name=names[row["arg"]] if row["arg"] < len(names) else f"a{row['arg']}",
                        shape=shape,
                        dtype=dtype,
                        role="checked" if row["cotangent"] else "integer: no cotangent",
                    )
                )
        arg = 0
        for leaf in leaves:
            if not leaf.checked:
                continue
            row = by_arg.get(arg, {})
            leaf.probes = row.get("probes")
            leaf.max_rel_discrepancy = row.get("max_rel_discrepancy")
            leaf.refuted = refutation is not None and refutation.arg == arg
            arg += 1
        return cls(
            verdict=doc["verdict"],
            function=function,
            inputs=leaves,
            evidence=doc["evidence"],
            probes=doc["probes"],
            points=doc["points"],
            boundary_points=doc.get("boundary_points", 0),
            given_point=doc.get("given_point", False),
            full_jacobian=doc.get("full_jacobian", False),
            failure_bound=doc.get("failure_bound"),
            min_margin=doc.get("min_margin"),
            site_margins=[
                SiteMargin(s["site"], s["op"], s["min"], s["argmin"], s["decisions"])
                for s in doc.get("site_margins", [])
            ],
            coverage=[
                Coverage(c["site"], c["op"], c["outcome_counts"], c["never_taken"])
                for c in doc.get("branch_coverage", [])
            ],
            kinks_resampled=doc.get("kinks_resampled", []),
            flat_ties=doc.get("flat_ties", []),
            non_finite_resampled=doc.get("non_finite_resampled", []),
            refutation=refutation,
            reason=reason,
            seed=doc.get("seed", 0),
            seconds=doc.get("seconds", 0.0),
            raw=doc,
        )

    def explain(self) -> str:
        """One paragraph: the verdict and, when not certified, why."""
        if self.certified:
            return f"certgrad: {self.function} IS the VJP of its forward ({self._evidence_line()})"
        if self.refuted:
            r = self.refutation
            return f"certgrad: {self.function} is NOT the VJP of its forward: {r}.\n  certifier: {r.detail}"
        return f"certgrad: could not decide whether {self.function} is the VJP of its forward: {self.reason}"

    def _evidence_line(self) -> str:
        if self.given_point:
            where = "the given point"
        elif self.certified:
            where = f"{self.points} seeded random point(s) at scales 1, 8, 1/4 in turn, seed {self.seed}"
        else:
            where = f"{self.points} seeded random point(s) certified before this verdict, seed {self.seed}"
        extra = f" + {self.boundary_points} boundary point(s)" if self.boundary_points else ""
        bound = f", P(wrong input passes) ≤ {self.failure_bound:.1e} per point" if self.failure_bound else ""
        jac = ", full Jacobian compared" if self.full_jacobian else ""
        return f"evidence {self.evidence}; {where}{extra}; {self.probes} probe(s) per input and point{jac}{bound}"

    def __repr__(self) -> str:
        lines = [f"<VjpReport {self.verdict.upper()}: {self.function}"]
        lines.append(f"  {self._evidence_line()}")
        width = max([len(i.name) for i in self.inputs] + [5])
        for i in self.inputs:
            ty = f"{i.dtype}{list(i.shape)}"
            if i.checked:
                disc = "-" if i.max_rel_discrepancy is None else f"{i.max_rel_discrepancy:.2e}"
                mark = "  REFUTED" if i.refuted else ""
                lines.append(f"  {i.name:<{width}}  {ty:<20} {i.probes or 0:>3} probes, max rel. discrepancy {disc}{mark}")
            else:
                lines.append(f"  {i.name:<{width}}  {ty:<20} {i.role}")
        if self.min_margin:
            m = self.min_margin
            lines.append(f"  smallest margin {m['margin']:.3e} at {m['site']}[{m['index']}]")
        for s in sorted(self.site_margins, key=lambda s: s.min)[:3]:
            lines.append(f"    site {s.site} ({s.op}): min margin {s.min:.3e} at [{s.at}], {s.decisions} decisions")
        untaken = [c for c in self.coverage if c.never_taken]
        if self.coverage:
            lines.append(
                f"  branch coverage: {len(self.coverage) - len(untaken)} of {len(self.coverage)} decision sites "
                f"took every outcome"
                + "".join(f"; {c.site} never {', '.join(c.never_taken)}" for c in untaken[:3])
            )
        if self.kinks_resampled:
            lines.append(f"  kinks resampled: {'; '.join(self.kinks_resampled[:3])}")
        if self.flat_ties:
            ties = list(dict.fromkeys(self.flat_ties))
            lines.append(f"  ties accepted (forward flat across them): {'; '.join(ties[:3])}")
        if self.non_finite_resampled:
            lines.append(f"  non-finite points skipped: {len(self.non_finite_resampled)}")
        if self.refutation is not None:
            lines.append(f"  refuted: {self.refutation}")
        if self.reason:
            lines.append(f"  undecided: {self.reason}")
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.append(f"  ({self.seconds:.3f} s)>")
        return "\n".join(lines)


_TYPE = re.compile(r"tensor<(?P<dims>(?:\d+x)*)(?P<elem>\w+)>")


def _parse_type(text: str) -> tuple[tuple[int, ...], str]:
    m = _TYPE.fullmatch(text.strip())
    if not m:
        return (), text
    dims = tuple(int(d) for d in m["dims"].split("x") if d)
    return dims, _ELEM_NAMES.get(m["elem"], m["elem"])


_ELEM_NAMES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i1": "bool",
               "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8",
               "ui16": "uint16", "ui32": "uint32", "ui64": "uint64"}


@dataclass
class TieSummary:
    """One tie of a net certificate (the whole-net tie or the parameter ties)."""

    verdict: str
    evidence: str
    points: int
    blocks: list[dict]
    site_margins: list[SiteMargin]
    coverage: list[Coverage]
    detail: Any
    seconds: float

    @classmethod
    def from_json(cls, doc: dict) -> "TieSummary":
        return cls(
            verdict=doc["verdict"],
            evidence=doc["evidence"],
            points=doc["points"],
            blocks=doc["blocks"],
            site_margins=[
                SiteMargin(s["site"], s["op"], s["min"], s["argmin"], s["decisions"]) for s in doc["site_margins"]
            ],
            coverage=[Coverage(c["site"], c["op"], c["outcome_counts"], c["never_taken"]) for c in doc["branch_coverage"]],
            detail=doc.get("detail"),
            seconds=doc["seconds"],
        )


@dataclass
class NetCertificate:
    """`certgrad certify NET`: the whole-net tie (the chain's backward IS the
    VJP of the logits forward) and the parameter ties (every parameter
    gradient of the loss chain IS dLoss/dθ), at the sampled point(s)."""

    net: str
    batch: int
    certified: bool
    parameter_tensors: int
    parameter_floats: int
    whole_net: TieSummary
    parameters: TieSummary
    seconds: float
    raw: dict = field(repr=False)

    def __bool__(self) -> bool:
        return self.certified

    @classmethod
    def from_json(cls, doc: dict) -> "NetCertificate":
        return cls(
            net=doc["net"],
            batch=doc["batch"],
            certified=doc["certified"],
            parameter_tensors=doc["parameter_tensors"],
            parameter_floats=doc["parameter_floats"],
            whole_net=TieSummary.from_json(doc["whole_net_tie"]),
            parameters=TieSummary.from_json(doc["parameter_ties"]),
            seconds=doc["seconds"],
            raw=doc,
        )

    def __repr__(self) -> str:
        word = "CERTIFIED" if self.certified else "NOT CERTIFIED"
        lines = [
            f"<NetCertificate {word}: {self.net} at batch {self.batch}, "
            f"{self.parameter_tensors} parameter tensors ({self.parameter_floats} floats)"
        ]
        for label, t in (("whole-net tie (logits)", self.whole_net), ("parameter ties (loss)", self.parameters)):
            bad = [b["block"] for b in t.blocks if b["verdict"] == "REFUTED"]
            worst = max((b["max_rel_discrepancy"] for b in t.blocks), default=0.0)
            lines.append(
                f"  {label}: {t.verdict}, evidence {t.evidence}, {t.points} point(s), {len(t.blocks)} blocks, "
                f"max rel. discrepancy {worst:.2e}" + (f", refuted at {bad[0]}" if bad else "")
            )
        sites = sorted(self.parameters.site_margins, key=lambda s: s.min)
        if sites:
            s = sites[0]
            lines.append(f"  {len(sites)} decision sites; smallest margin {s.min:.3e} at {s.site} ({s.op})")
        untaken = sum(1 for c in self.parameters.coverage if c.never_taken)
        if self.parameters.coverage:
            lines.append(f"  branch coverage: {untaken} of {len(self.parameters.coverage)} sites left an outcome untaken")
        lines.append(f"  ({self.seconds:.1f} s)>")
        return "\n".join(lines)


class StepReport(_Verdict):
    """`certgrad certify-step` on an exported train step: `verdict`
    ("certified", "refuted", "undecided"), `detail`, `rows` (one dict per
    parameter: name, type, gradient_line, gradient_op, status), `tail` (the
    recognised optimizer, or None with `tail_note`), `scale` (κ: the update
    reads κ·∂loss/∂θ), `localisation` (where a refuted gradient's backward
    first goes wrong), `table` (the binary's printed report) and `text` (the
    exported step)."""

    def __init__(self, doc: dict, table: str, text: str):
        self.doc = doc
        self.verdict = doc["verdict"]
        self.detail: str = doc["detail"]
        self.rows: list[dict] = doc["parameters"]
        self.tail: str | None = doc["tail"]
        self.tail_note: str = doc["tail_note"]
        self.scale: float | None = doc["scale"]
        self.localisation: dict | None = doc.get("localisation")
        self.table = table
        self.text = text

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        return f"<StepReport {self.verdict}: {len(self.rows)} parameters, tail {self.tail or self.tail_note!r}>"
