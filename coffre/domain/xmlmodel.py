"""Binding between pydantic models and DET XML elements, declared once per model.

A model's fields, in declaration order, are the schema's sequence: the field name is the
schema's element name, so serialization walks the fields and emits children in schema
order whatever order the input had. Three kinds of field:

* an element (the default): text, a nested :class:`XmlModel`, or a list of either;
  a list of a union of models is a substitution group (``cercle:Action``), kept in order;
* an attribute (``Annotated[..., ATTRIBUTE]``), emitted only when it differs from its default;
* a flag (``Annotated[..., FLAG]``), an empty marker element such as ``<Supervision/>``;
* the text content (``Annotated[..., TEXT]``) of an element that is a model only because it
  is a member of a substitution group or carries attributes (at most one per model).

Other spellings an operator may send (the annex's ``SoldeAprès``, ``Stackin``, the
``supervision="true"`` attribute…) are declared as pydantic validation aliases with
:func:`spelled`; the schema's spelling always comes first and is the one emitted. An
attribute or flag may arrive either as an attribute or as an element.
"""

from __future__ import annotations

import types as pytypes
import typing
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, ClassVar, Union

from lxml import etree
from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from .errors import Problem, ReasonCode
from .types import fail


class _Marker:
    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"<xml {self.kind}>"


ATTRIBUTE = _Marker("attribute")
FLAG = _Marker("flag")
TEXT = _Marker("text")


def _switch(value: Any) -> bool:
    """xs:boolean or an empty marker element: ``""``/``true``/``1`` is on, ``false``/``0`` off."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in ("", "true", "1"):
        return True
    if isinstance(value, str) and value.strip() in ("false", "0"):
        return False
    raise fail(ReasonCode.INVALID_BOOLEAN, "'{value}' is neither empty nor an xs:boolean", value=value)


Switch = Annotated[bool, BeforeValidator(_switch)]
FlagField = Annotated[Switch, FLAG]
"""An empty marker element (types:empty), true when present."""
AttributeSwitch = Annotated[Switch, ATTRIBUTE]
"""A boolean attribute with default false (``retransmission``, ``test``, ``ouverte``…)."""


def spelled(*names: str, default: Any = ..., **kwargs: Any) -> Any:
    """A field accepting several input spellings; the first is the schema's, the one emitted."""
    return Field(default, validation_alias=AliasChoices(*names), **kwargs)


class XmlModel(BaseModel):
    """A schema complex type. ``xml_tag`` is set on roots and substitution-group members."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, hide_input_in_errors=True, defer_build=True
    )
    xml_tag: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _unwrap_tagged(cls, data: Any) -> Any:
        """Accept ``{"Bet": {...}}`` (the JSON form of a substitution-group member) as the member."""
        known = _UNWRAP.get(cls)
        if known is None:
            tag = cls.xml_tag
            known = _UNWRAP[cls] = (tag if tag not in cls.model_fields else "", binding(cls).text_field)
        tag, text_field = known
        if tag and isinstance(data, dict) and len(data) == 1 and tag in data:
            data = data[tag]
        if text_field is not None and not isinstance(data, (dict, XmlModel)):
            return {text_field: data}
        return data


_UNWRAP: dict[type[XmlModel], tuple[str, str | None]] = {}
"""Per model, asked at every validation of every element: the tag it unwraps (its ``xml_tag``
unless a field has that name; "" for none) and its TEXT field (:attr:`ModelBinding.text_field`)."""


# --------------------------------------------------------------------------- binding


@dataclass(frozen=True, slots=True)
class FieldBinding:
    name: str
    xml_names: tuple[str, ...]
    kind: str  # "element" | "attribute" | "flag"
    many: bool
    model: type[XmlModel] | None
    members: dict[str, type[XmlModel]] | None
    default: Any


@dataclass(frozen=True, slots=True)
class ModelBinding:
    fields: tuple[FieldBinding, ...]
    by_xml_name: dict[str, FieldBinding]
    by_key: dict[str, FieldBinding]
    text_field: str | None


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """Peel Annotated and Optional; return the core type and the metadata collected."""
    metadata: list[Any] = []
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            metadata.extend(annotation.__metadata__)
            annotation = annotation.__origin__
        elif origin in (Union, pytypes.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
            else:
                return annotation, metadata
        else:
            return annotation, metadata


def _model_members(annotation: Any) -> dict[str, type[XmlModel]] | None:
    core, _ = _strip(annotation)
    if typing.get_origin(core) in (Union, pytypes.UnionType):
        members = {}
        for arg in typing.get_args(core):
            arg, _ = _strip(arg)
            if isinstance(arg, type) and issubclass(arg, XmlModel):
                members[arg.xml_tag] = arg
        return members
    return None


@cache
def binding(cls: type[XmlModel]) -> ModelBinding:
    fields = []
    for name, info in cls.model_fields.items():
        core, metadata = _strip(info.annotation)
        metadata += list(info.metadata)
        kind = "element"
        if any(m is ATTRIBUTE for m in metadata):
            kind = "attribute"
        elif any(m is FLAG for m in metadata):
            kind = "flag"
        elif any(m is TEXT for m in metadata):
            kind = "text"
        many = typing.get_origin(core) is list
        item = typing.get_args(core)[0] if many else core
        members = _model_members(item)
        item_core, _ = _strip(item)
        model = item_core if isinstance(item_core, type) and issubclass(item_core, XmlModel) else None
        alias = info.validation_alias
        names = tuple(alias.choices) if isinstance(alias, AliasChoices) else (name,)
        default = None if info.is_required() else info.default
        fields.append(FieldBinding(name, tuple(str(n) for n in names), kind, many, model, members, default))
    by_xml_name: dict[str, FieldBinding] = {}
    by_key: dict[str, FieldBinding] = {}
    for fb in fields:
        by_key[fb.name] = fb
        if fb.members is not None:  # a substitution group: its members' tags, never its own name
            for tag in fb.members:
                by_xml_name[tag] = fb
            continue
        for n in fb.xml_names:
            by_key[n] = fb
            if fb.kind != "text":  # text content is never a child element
                by_xml_name[n] = fb
    text_fields = [fb.name for fb in fields if fb.kind == "text"]
    if len(text_fields) > 1:
        raise TypeError(f"{cls.__name__} has more than one TEXT field")
    return ModelBinding(tuple(fields), by_xml_name, by_key, text_fields[0] if text_fields else None)


# --------------------------------------------------------------------------- XML -> data


def element_to_data(
    cls: type[XmlModel], el: etree._Element, path: str, problems: list[Problem]
) -> dict[str, Any]:
    """The input dict for ``cls.model_validate`` from an element; structural problems are collected.

    A child's path is only written out when a problem or a nested model needs it (most children are
    text leaves without either), and attributes and grandchildren are read through lxml's C calls."""
    b = binding(cls)
    by_xml_name = b.by_xml_name
    data: dict[str, Any] = {}
    for key, value in el.items():
        fb = by_xml_name.get(key)
        if fb is None or fb.kind in ("element", "text"):
            problems.append(
                Problem(ReasonCode.UNEXPECTED_ATTRIBUTE, f"{path}/@{key}", f"no attribute '{key}' here")
            )
            continue
        data[key] = value
    if b.text_field is not None:
        data[b.text_field] = el.text or ""
    seen: dict[str, int] = {}
    for child in el:
        tag = child.tag
        if not isinstance(tag, str):
            continue
        seen[tag] = nth = seen.get(tag, 0) + 1
        fb = by_xml_name.get(tag)
        if fb is None:
            problems.append(
                Problem(ReasonCode.UNEXPECTED_ELEMENT, f"{path}/{tag}", f"no element '{tag}' here")
            )
            continue
        if fb.members is not None:
            child_path = f"{path}/{tag}[{nth}]" if fb.many else f"{path}/{tag}"
            value: Any = {tag: element_to_data(fb.members[tag], child, child_path, problems)}
        elif fb.model is not None:
            child_path = f"{path}/{tag}[{nth}]" if fb.many else f"{path}/{tag}"
            value = element_to_data(fb.model, child, child_path, problems)
        else:
            if len(child) or child.keys():
                _leaf_problems(tag, child, f"{path}/{tag}[{nth}]" if fb.many else f"{path}/{tag}", problems)
            value = child.text or ""
        if fb.many:
            data.setdefault(fb.name if fb.members is not None else tag, []).append(value)
        elif tag in data:
            child_path = f"{path}/{tag}[{nth}]" if fb.many else f"{path}/{tag}"
            problems.append(Problem(ReasonCode.TOO_MANY_OCCURRENCES, child_path, f"{tag} may occur once"))
        else:
            data[tag] = value
    return data


def _leaf_problems(tag: str, child: etree._Element, child_path: str, problems: list[Problem]) -> None:
    """A text-only element that carries attributes or child elements."""
    for key in child.attrib:
        problems.append(
            Problem(ReasonCode.UNEXPECTED_ATTRIBUTE, f"{child_path}/@{key}", f"{tag} has no attributes")
        )
    for grandchild in child:
        if isinstance(grandchild.tag, str):
            problems.append(
                Problem(
                    ReasonCode.UNEXPECTED_ELEMENT,
                    f"{child_path}/{grandchild.tag}",
                    f"{tag} holds text only",
                )
            )


def loc_to_path(cls: type[XmlModel], root: str, loc: tuple[Any, ...], data: Any) -> str:
    """An XPath from the root for a pydantic error location, using the input to number siblings."""
    parts = [f"/{root}"]
    current: type[XmlModel] | None = cls
    i = 0
    while i < len(loc) and current is not None:
        key = loc[i]
        fb = binding(current).by_key.get(str(key)) if isinstance(key, str) else None
        if fb is None:
            parts.append(f"/{key}")
            break
        if fb.kind == "text":
            break
        value = data.get(key) if isinstance(data, dict) else None
        if fb.kind == "attribute":
            parts.append(f"/@{fb.xml_names[0]}")
            break
        if fb.members is not None and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            index = loc[i + 1]
            items = value if isinstance(value, list) else []
            tag = loc[i + 2] if i + 2 < len(loc) and isinstance(loc[i + 2], str) else None
            if (
                tag is None
                and index < len(items)
                and isinstance(items[index], dict)
                and len(items[index]) == 1
            ):
                tag = next(iter(items[index]))
            if tag in fb.members:
                nth = sum(1 for it in items[: index + 1] if isinstance(it, dict) and tag in it)
                parts.append(f"/{tag}[{nth}]")
                current = fb.members[tag]
                item = items[index] if index < len(items) else None
                data = item.get(tag) if isinstance(item, dict) else None
                i += 3
                continue
            parts.append(f"/*[{index + 1}]")
            break
        if fb.many and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            index = loc[i + 1]
            parts.append(f"/{key}[{index + 1}]")
            items = value if isinstance(value, list) else []
            data = items[index] if index < len(items) else None
            i += 2
        else:
            parts.append(f"/{key}")
            data = value
            i += 1
        current = fb.model
    return "".join(parts)


# --------------------------------------------------------------------------- model -> XML / data


def xml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def to_element(model: XmlModel, tag: str | None = None) -> etree._Element:
    """The element for a model, children in schema order."""
    el = etree.Element(tag or model.xml_tag)
    _fill(el, model)
    return el


def _fill(el: etree._Element, model: XmlModel) -> None:
    for fb in binding(type(model)).fields:
        value = getattr(model, fb.name)
        if value is None:
            continue
        if fb.kind == "attribute":
            if value != fb.default:
                el.set(fb.name, xml_text(value))
        elif fb.kind == "text":
            el.text = xml_text(value)
        elif fb.kind == "flag":
            if value:
                etree.SubElement(el, fb.name)
        else:
            for item in value if fb.many else (value,):
                child = etree.SubElement(el, item.xml_tag if fb.members is not None else fb.name)
                if isinstance(item, XmlModel):
                    _fill(child, item)
                else:
                    child.text = xml_text(item)


def to_data(model: XmlModel) -> dict[str, Any]:
    """The canonical JSON form: schema names, amounts as strings, markers as ``true``."""
    b = binding(type(model))
    if b.text_field is not None and all(
        fb.kind == "text" or getattr(model, fb.name) in (None, fb.default) for fb in b.fields
    ):
        return xml_text(getattr(model, b.text_field))  # type: ignore[return-value]
    out: dict[str, Any] = {}
    for fb in b.fields:
        value = getattr(model, fb.name)
        if (
            value is None
            or (fb.kind == "attribute" and value == fb.default)
            or (fb.kind == "flag" and not value)
        ):
            continue
        if fb.kind in ("attribute", "flag"):
            out[fb.name] = value
            continue
        if fb.kind == "text":
            out[fb.name] = xml_text(value)
            continue

        def one(item: Any, fb: FieldBinding = fb) -> Any:
            if isinstance(item, XmlModel):
                return {item.xml_tag: to_data(item)} if fb.members is not None else to_data(item)
            return item if isinstance(item, (bool, int)) else xml_text(item)

        out[fb.name] = [one(v) for v in value] if fb.many else one(value)
    return out
