"""The base of every config section: pydantic models with one-line errors naming the key.

Each section is a pydantic model that forbids unknown keys, validates
assignments, rejects non-finite floats and declares every numeric range once,
in its field.  Errors become :class:`ConfigError` with a one-line message:
the dotted key, what is wrong or expected, and the value given.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic import ValidationError as _ValidationError


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the key."""


def _yaml_float(value: Any) -> Any:
    """Numbers stay numbers; YAML 1.1 reads ``3e-5`` (no dot) as a string, so numeric strings convert."""
    if isinstance(value, bool):
        raise ValueError("expected a number")
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError("expected a number") from None
    return value


def _string_keys(value: Any) -> Any:
    """YAML may read a mapping key as a number (``0: SUPPORTS``); keys are names, so they become strings."""
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return value


Int = StrictInt
Bool = StrictBool
Str = StrictStr
Float = Annotated[float, BeforeValidator(_yaml_float)]
NonNegativeFloat = Annotated[float, BeforeValidator(_yaml_float), Field(ge=0)]
StrMap = Annotated[dict[StrictStr, StrictStr], BeforeValidator(_string_keys)]
WeightMap = Annotated[dict[StrictStr, NonNegativeFloat], BeforeValidator(_string_keys)]


class Section(BaseModel):
    """One config section; ``section`` is its key in the whole config (used in error messages)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, allow_inf_nan=False, validate_default=False
    )
    section: ClassVar[str] = ""
    # Keys added after artifacts and runs were hashed: left out of :meth:`hash_dump` while at
    # the value they had before they existed (their first default; a later default may differ and
    # is then hashed), so that what was built before they existed keeps its hash.
    HASH_OPTIONAL: ClassVar[dict[str, Any]] = {}
    # Keys that change how something is built, never what: always left out of :meth:`hash_dump`.
    NOT_HASHED: ClassVar[frozenset[str]] = frozenset()

    def hash_dump(self) -> dict:
        """``model_dump()`` for hashing: :attr:`HASH_OPTIONAL` keys at their default and
        :attr:`NOT_HASHED` keys are left out."""
        return self.hashed_fields(self.model_dump())

    @classmethod
    def hashed_fields(cls, dump: dict) -> dict:
        """:meth:`hash_dump` of a stored ``model_dump()`` (one written before a key existed, too)."""
        return {
            k: v
            for k, v in dump.items()
            if k not in cls.NOT_HASHED and (k not in cls.HASH_OPTIONAL or v != cls.HASH_OPTIONAL[k])
        }

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except _ValidationError as e:
            raise ConfigError(describe_error(e, type(self), self.section)) from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except _ValidationError as e:
            raise ConfigError(describe_error(e, type(self), self.section)) from None

    def replace(self, **changes: Any) -> Section:
        """A validated copy with ``changes`` applied (the pydantic counterpart of ``dataclasses.replace``)."""
        return type(self)(**{**self.model_dump(), **changes})


def bounds_of(model: type[BaseModel], name: str) -> tuple[float | None, bool, float | None, bool]:
    """``(low, low_inclusive, high, high_inclusive)`` of a numeric field (None: unbounded)."""
    low = high = None
    low_inc = high_inc = True
    for m in model.model_fields[name].metadata:
        if isinstance(m, Ge):
            low, low_inc = m.ge, True
        elif isinstance(m, Gt):
            low, low_inc = m.gt, False
        elif isinstance(m, Le):
            high, high_inc = m.le, True
        elif isinstance(m, Lt):
            high, high_inc = m.lt, False
    return low, low_inc, high, high_inc


def describe_range(model: type[BaseModel], name: str) -> str:
    """``"must be in [0, 1]"``, ``"must be > 0"`` … for a numeric field."""
    low, low_inc, high, high_inc = bounds_of(model, name)
    if low is not None and high is not None:
        return f"must be in {'[' if low_inc else '('}{low:g}, {high:g}{']' if high_inc else ')'}"
    if low is not None:
        return f"must be {'>=' if low_inc else '>'} {low:g}"
    if high is not None:
        return f"must be {'<=' if high_inc else '<'} {high:g}"
    return "out of range"


_TYPE_WORDS = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true/false",
    "bool_parsing": "expected true/false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "finite_number": "must be a finite number",
}
_BOUND_WORDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _field_owner(model: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, str | None]:
    """The model that declares the field at ``loc`` and the field's name (None where loc leaves models)."""
    owner: type[BaseModel] | None = model
    name: str | None = None
    for part in loc:
        if owner is None or not isinstance(part, str) or part not in owner.model_fields:
            return (owner, name) if name is None else (None, None)
        name = part
        annotation = owner.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            owner, name = annotation, None
    return owner, name


def describe_error(error: _ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    """One line for a pydantic error: ``key: what is wrong, got VALUE`` (plus a count of further errors)."""
    first = error.errors(include_url=False)[0]
    if first["type"] == "value_error" and isinstance(first["ctx"]["error"], ConfigError):
        return str(first["ctx"]["error"])  # a nested section already named its key
    loc = tuple(first["loc"])
    key = ".".join([prefix, *map(str, loc)] if prefix else [str(p) for p in loc])
    kind = first["type"]
    value = first.get("input")
    if kind == "extra_forbidden":
        parent_loc = loc[:-1]
        owner, _ = _field_owner(model, parent_loc)
        parent = ".".join([prefix, *map(str, parent_loc)] if prefix else map(str, parent_loc)) or "config"
        unknown = sorted(str(e["loc"][-1]) for e in error.errors() if tuple(e["loc"][:-1]) == parent_loc)
        known = sorted(owner.model_fields) if owner is not None else []
        message = f"{parent}: unknown key(s) {unknown} (known: {known})"
    elif kind in _RANGE_ERRORS:
        owner, name = _field_owner(model, loc)
        if owner is not None and name:
            what = describe_range(owner, name)
        else:  # a value inside a list or mapping: the bound that was broken
            ((bound, limit),) = first["ctx"].items()
            what = f"must be {_BOUND_WORDS[bound]} {limit:g}"
        message = f"{key}: {what}, got {value!r}"
    elif kind == "too_short":
        count = first["ctx"]["min_length"]
        message = f"{key}: needs at least {count} item{'s' * (count != 1)}, got {value!r}"
    elif kind == "literal_error":
        message = f"{key}: must be one of {first['ctx']['expected']}, got {value!r}"
    elif kind in _TYPE_WORDS:
        message = f"{key}: {_TYPE_WORDS[kind]}, got {value!r}"
    elif kind == "value_error":
        shown = "" if isinstance(value, (list, dict)) else f", got {value!r}"
        message = f"{key}: {first['ctx']['error']}{shown}"
    else:
        message = f"{key}: {first['msg']}, got {value!r}"
    more = error.error_count() - 1
    if kind == "extra_forbidden":
        more -= len(unknown) - 1
    return message + (f" (and {more} more error{'s' * (more > 1)})" if more > 0 else "")


def check_component_name(kind: str, name: str, own: tuple[str, ...]) -> None:
    """Refuse a bad or taken name for a registered component (a retriever, a verifier).

    Raises:
        ValueError: ``name`` is empty, has characters other than letters, digits, ``_`` and ``-``,
            or is one of garag's own (``own``).
    """
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ValueError(f"{kind} name {name!r}: use letters, digits, '_' and '-'")
    if name in own:
        raise ValueError(f"{kind} name {name!r} is one of garag's own")
