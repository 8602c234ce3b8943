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

import re
import types as pytypes
import typing
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from itertools import islice
from typing import Annotated, Any, ClassVar, Union

from lxml import etree
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    WrapValidator,
    model_validator,
)

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


class Declined(Exception):
    """The fast path (:func:`element_to_data_fast`) met something it leaves to the full one."""


_LEAF, _MODEL, _MEMBER, _REMEMBERED = range(4)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What :func:`element_to_data_fast` needs of a model, looked up once."""

    children: dict[str, tuple[int, str, bool, Any]]
    """Child tag -> (kind, key in the data, many, what): a leaf (what: None), a model or a member
    (what: its model) or a remembered member (what: its model and its memory, :func:`_member_model`;
    the groups whose members may be given as models, :func:`_remembered_members`)."""
    attributes: frozenset[str]
    """The xml names that may be attributes here (those of attribute and flag fields)."""
    text_field: str | None


@cache
def _plan(cls: type[XmlModel]) -> _Plan:
    b = binding(cls)
    children: dict[str, tuple[int, str, bool, Any]] = {}
    for tag, fb in b.by_xml_name.items():
        name = fb.name if fb.many and fb.members is not None else tag  # as element_to_data keys it
        if fb.members is not None:
            member = fb.members[tag]
            if _remembered_members(cls, fb.name):
                children[tag] = (_REMEMBERED, name, fb.many, (member, _MEMBERS.setdefault(member, {})))
            else:
                children[tag] = (_MEMBER, name, fb.many, member)
        elif fb.model is not None:
            children[tag] = (_MODEL, name, fb.many, fb.model)
        else:
            children[tag] = (_LEAF, name, fb.many, None)
    attributes = frozenset(n for n, fb in b.by_xml_name.items() if fb.kind in ("attribute", "flag"))
    return _Plan(children, attributes, b.text_field)


_tostring = etree.tostring


def element_to_data_fast(cls: type[XmlModel], el: etree._Element) -> dict[str, Any]:
    """What :func:`element_to_data` gives for an element without any structural problem, faster:
    no paths are written, :class:`Declined` is raised at the first problem (the caller then takes
    the full path, which names them all), and the members of a substitution group are given as
    models already validated, remembered by their XML (:func:`_member_model`) when
    :func:`_remembered_members` allows it. A ``ValidationError`` from a member also means: take the
    full path.

    Every element below ``el`` is read (a leaf must have no attribute and no child element), so a
    walk that ends well also proves the tree no deeper and no more attributed than the models
    (:func:`shape`)."""
    plan = _plan(cls)
    data: dict[str, Any] = {}
    if el.attrib:
        # keys() first: lxml's items() looks each value up by name, quadratic in the attributes
        # (50,000 of them took 10 s); the keys a model may have are a handful
        if not plan.attributes.issuperset(el.keys()):
            raise Declined
        data.update(el.items())
    if plan.text_field is not None:
        data[plan.text_field] = el.text or ""
    children = plan.children
    for child in el:
        tag = child.tag
        if tag.__class__ is not str:
            continue
        how = children.get(tag)
        if how is None:
            raise Declined
        kind, name, many, what = how
        if kind == _LEAF:
            if len(child) or child.attrib:
                raise Declined
            value: Any = child.text or ""
        elif kind == _REMEMBERED:
            key = _tostring(child, encoding="unicode", with_tail=False)
            value = what[1].get(key)
            if value is None:
                if len(key) > MEMBER_KEY_LONGEST:  # valid perhaps (blanks around a value), not kept
                    value = {tag: element_to_data_fast(what[0], child)}
                else:
                    value = _member_model(what[0], child, what[1], key)
        elif kind == _MODEL:
            value = element_to_data_fast(what, child)
        else:
            value = {tag: element_to_data_fast(what, child)}
        if many:
            items = data.get(name)
            if items is None:
                data[name] = [value]
            else:
                items.append(value)
        elif name in data:
            raise Declined
        else:
            data[name] = value
    return data


MEMBER_MEMORY = 16_384
"""Validated models remembered per member type (:func:`_member_model`); beyond, the older half is
forgotten. Some 850 bytes each: 14 MB at most for poker's Bet, the only one of 10,000 played hands
to pass 8,192 (Draw 988, Discard and Reveal 468, Check and Fold 9); with 8,192, 95 % of the
actions were found there."""

MEMBER_KEY_LONGEST = 256
"""Members whose XML is longer (in characters) are validated in place, not remembered (a poker action takes some 40
to 80 characters): an input may weigh a megabyte, and the memory must stay small."""

_MEMBERS: dict[type[XmlModel], dict[str, XmlModel]] = {}


def _member_model(
    member: type[XmlModel], el: etree._Element, memory: dict[str, XmlModel], key: str
) -> XmlModel:
    """The validated model of a substitution-group member not yet in ``memory``, kept there under
    ``key``, its XML.

    A hand repeats its actions (a Check at seat 3, a card dealt, a big blind): most are found there.
    The key is the element's whole serialization (tag, attributes in order, text, descendants, no
    tail), i.e. everything :func:`element_to_data` reads of it, and a member's validation depends on
    nothing else (no validation context; :func:`_remembered_members` checks that its parent reads
    nothing of it before validation), so the model is the one the full validation would build, equal
    to it. Models are frozen, so one may be shared by several events. Only valid members are kept."""
    model = member.model_validate(element_to_data_fast(member, el))
    if len(memory) >= MEMBER_MEMORY:
        for old in list(islice(memory, MEMBER_MEMORY // 2)):
            memory.pop(old, None)
    memory[key] = model
    return model


@cache
def shape(cls: type[XmlModel]) -> tuple[int, int]:
    """The deepest nesting of elements (``cls``'s own counted) and the most attributes on one
    element that :func:`element_to_data_fast` lets through for ``cls``; a recursive model has no
    bound (a very large depth)."""
    return _shape(cls, frozenset())


def _shape(cls: type[XmlModel], within: frozenset[type[XmlModel]]) -> tuple[int, int]:
    if cls in within:
        return 1 << 30, 1 << 30
    plan_attributes = sum(1 for fb in binding(cls).by_xml_name.values() if fb.kind in ("attribute", "flag"))
    depth, attributes = 1, plan_attributes
    for fb in binding(cls).fields:
        below = [*([fb.model] if fb.model else []), *(fb.members or {}).values()]
        if not below and fb.kind != "text":
            depth = max(depth, 2)  # a leaf element
        for model in below:
            d, a = _shape(model, within | {cls})
            depth, attributes = max(depth, 1 + d), max(attributes, a)
    return depth, attributes


@cache
def _remembered_members(cls: type[XmlModel], name: str) -> bool:
    """Whether the members of the substitution group ``name`` of ``cls`` may be given to ``cls`` as
    validated models: every member is a flat model (no nested model, so no element of it is
    validated in another context), and nothing between ``cls`` and its members would read a
    member's input before it is validated: no before-, wrap- or plain validator on the field or
    its items, and no before-validator of ``cls`` but :meth:`XmlModel._unwrap_tagged` (which passes
    a model through). The discriminators take a model as they take ``{"Tag": {...}}``."""
    fb = binding(cls).by_key[name]
    assert fb.members is not None
    flat = all(
        f.model is None and f.members is None
        for member in fb.members.values()
        for f in binding(member).fields
    )
    decorators = cls.__pydantic_decorators__
    before = [
        key
        for key, dec in decorators.model_validators.items()
        if dec.info.mode != "after" and key != "_unwrap_tagged"
    ]
    own = [
        dec
        for dec in decorators.field_validators.values()
        if name in dec.info.fields or "*" in dec.info.fields
    ]
    info = cls.model_fields[name]
    return flat and not before and not own and not _reads_input([info.annotation, *info.metadata], fb.members)


def _reads_input(annotations: list[Any], members: dict[str, type[XmlModel]]) -> bool:
    """Whether a before-, wrap- or plain validator is found in ``annotations`` (recursively, through
    ``Annotated``, lists and unions), the members' own fields excepted."""
    for annotation in annotations:
        if isinstance(annotation, (BeforeValidator, WrapValidator, PlainValidator)):
            return True
        if isinstance(annotation, type) and annotation in members.values():
            continue
        if typing.get_origin(annotation) is Annotated:
            if _reads_input([annotation.__origin__, *annotation.__metadata__], members):
                return True
        elif _reads_input(list(typing.get_args(annotation)), members):
            return True
    return False


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


# --------------------------------------------------------------------------- model -> canonical text

_TEXT_SPECIAL = re.compile("[&<>\r]")
_ATTRIBUTE_SPECIAL = re.compile('[&<"\t\n\r]')
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", '"': "&quot;", "\t": "&#x9;", "\n": "&#xA;", "\r": "&#xD;"}
)


@dataclass(frozen=True, slots=True)
class _Output:
    """What :func:`canonical_text` needs of a model, looked up once: its attribute fields in the
    order exclusive C14N writes them (by name), its text field, then its flag and element fields in
    schema order as (name, is a flag, many, is a substitution group, start tag, end tag)."""

    attributes: tuple[tuple[str, Any], ...]
    text_field: str | None
    children: tuple[tuple[str, bool, bool, bool, str, str], ...]


@cache
def _output(cls: type[XmlModel]) -> _Output:
    b = binding(cls)
    attributes = tuple(sorted((fb.name, fb.default) for fb in b.fields if fb.kind == "attribute"))
    children = tuple(
        (fb.name, fb.kind == "flag", fb.many, fb.members is not None, f"<{fb.name}>", f"</{fb.name}>")
        for fb in b.fields
        if fb.kind in ("flag", "element")
    )
    return _Output(attributes, b.text_field, children)


def canonical_text(model: XmlModel, replace: dict[str, Any] | None = None) -> str:
    """The exclusive C14N 1.0 text of ``to_element(model)``, written directly (no tree is built):
    attributes sorted by name, empty elements as start and end tags, text and attribute values
    escaped as C14N escapes them. ``replace`` gives other values to some of the root's fields (the
    IDEvt ingest assigns), as if the model held them.

    The caller checks that the text holds only XML characters (lxml refuses the others when it
    builds the tree; :func:`~coffre.domain.codec.canonical_bytes` then takes that path). The tests
    hold it to lxml's C14N of the same model."""
    parts: list[str] = []
    _write(parts, model, model.xml_tag, replace)
    return "".join(parts)


def _write(parts: list[str], model: XmlModel, tag: str, replace: dict[str, Any] | None = None) -> None:
    out = _output(type(model))
    values = model.__dict__
    if replace:
        values = {**values, **replace}
    append = parts.append
    start = "<" + tag
    for name, default in out.attributes:
        value = values[name]
        if value is None or value == default:
            continue
        text = value if value.__class__ is str else xml_text(value)
        if _ATTRIBUTE_SPECIAL.search(text):
            text = text.translate(_ATTRIBUTE_ESCAPES)
        start += f' {name}="{text}"'
    append(start + ">")
    if out.text_field is not None:
        value = values[out.text_field]
        if value is not None:
            append(_escaped(value if value.__class__ is str else xml_text(value)))
    for name, flag, many, members, start_tag, end_tag in out.children:
        value = values[name]
        if value is None:
            continue
        if flag:
            if value:
                append(start_tag + end_tag)
            continue
        for item in value if many else (value,):
            if item.__class__ is str:
                text = item
            elif isinstance(item, XmlModel):
                _write(parts, item, item.xml_tag if members else name)
                continue
            else:
                text = xml_text(item)
            append(start_tag + _escaped(text) + end_tag)
    append(f"</{tag}>")


def _escaped(text: str) -> str:
    return text.translate(_TEXT_ESCAPES) if _TEXT_SPECIAL.search(text) else text
