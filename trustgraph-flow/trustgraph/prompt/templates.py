"""Prompt templates: compiled once when config changes, rendered per request, and
the model's answer to a json/jsonl template parsed and checked against its schema
(text-completion has the model's server constrain the answer to that schema, and
checks it too: ``asked_schema``).

Rendering uses a sandboxed Jinja2 environment (templates are data anyone with config
access can edit) with strict undefined variables: a variable the request does not
give is an error naming it, never an empty string in the prompt.
"""
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import jinja2
import jsonschema
from jinja2.sandbox import ImmutableSandboxedEnvironment

from trustgraph.base import HandledError
from trustgraph.model.text_completion.structured import json_in, unfenced
from trustgraph.schema import PromptTemplate

log = logging.getLogger(__name__)

ERROR = "prompt-error"
# The caller's mistakes get the types every service uses for them, so the gateway
# answers them 404 / 400 rather than as a failure of the service.
NOT_FOUND = "not-found"
BAD_REQUEST = "bad-request"

_environment = ImmutableSandboxedEnvironment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
# ``tojson`` is HTML-escaping; prompts want JSON as a model reads it.
_environment.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)

_UNDEFINED_NAME = re.compile(r"^'([^']+)' is undefined$")


class PromptError(HandledError):
    def __init__(self, message: str, type: str = ERROR) -> None:
        super().__init__(type, message)


@dataclass(frozen=True)
class Compiled:
    id: str
    definition: PromptTemplate
    system: jinja2.Template
    prompt: jinja2.Template
    validator: jsonschema.protocols.Validator | None

    @property
    def response_type(self) -> str:
        return self.definition.response_type

    @property
    def asked_schema(self) -> dict[str, Any] | None:
        """The schema text-completion answers under: the template's, for jsonl an
        array of such items (asked as one JSON array, not lines)."""
        schema = self.definition.json_schema
        if schema is None or self.response_type != "jsonl":
            return schema
        return {"type": "array", "items": schema}

    def render(self, variables: dict[str, Any]) -> tuple[str, str]:
        """(system, prompt) for these variables."""
        try:
            return self.system.render(variables), self.prompt.render(variables)
        except jinja2.UndefinedError as error:
            match = _UNDEFINED_NAME.match(str(error))
            given = ", ".join(sorted(variables)) or "none"
            what = f"variable '{match.group(1)}' is undefined" if match else str(error)
            raise PromptError(f"template '{self.id}': {what} (the request gave: {given})",
                              BAD_REQUEST) from None
        except jinja2.TemplateError as error:  # includes the sandbox's SecurityError
            raise PromptError(f"template '{self.id}' failed to render: {error}") from None

    def parse(self, answer: str) -> Any:
        """The model's answer to a json/jsonl template as a checked JSON value (a
        jsonl answer becomes a list of its lines' values). Under a schema it is the
        JSON text-completion checked (jsonl: one array); else the JSON is looked
        for in what the model wrote (a Markdown fence, a sentence around it)."""
        if self.asked_schema is not None:
            try:
                value = json.loads(answer)
            except ValueError:
                pass  # not as text-completion sends it: read it as a model writes
            else:
                jsonl = self.response_type == "jsonl"
                for n, item in enumerate(value if jsonl else [value]):
                    self._check(item, f"item {n}" if jsonl else "answer")
                return value
        if self.response_type == "jsonl":
            items = [_loads(self.id, line, f"line {n}")
                     for n, line in enumerate(unfenced(answer).splitlines(), 1)
                     if line.strip()]
            for n, item in enumerate(items):
                self._check(item, f"item {n}")
            return items
        value = _loads(self.id, json_in(answer), "answer")
        self._check(value, "answer")
        return value

    def _check(self, value: Any, what: str) -> None:
        if self.validator is None:
            return
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is not None:
            where = "/" + "/".join(str(p) for p in error.absolute_path)
            raise PromptError(f"the model's {what} for template '{self.id}' does not match "
                              f"its schema at {where}: {error.message}")


def compile_template(id: str, value: Any, system: str = "") -> Compiled:
    """A config value (dict) as a ready template; ``PromptError`` says what is wrong.
    ``system``: the system prompt it has when it has none of its own (config's shared
    one, TrustGraph's ``system`` key)."""
    try:
        definition = PromptTemplate.model_validate(value)
        if not definition.system and system:
            definition = definition.model_copy(update={"system": system})
        validator = None
        if definition.json_schema is not None:
            cls = jsonschema.validators.validator_for(definition.json_schema)
            cls.check_schema(definition.json_schema)
            validator = cls(definition.json_schema)
        return Compiled(id, definition, _environment.from_string(definition.system),
                        _environment.from_string(definition.prompt), validator)
    except (ValueError, jinja2.TemplateSyntaxError,
            jsonschema.exceptions.SchemaError) as error:
        raise PromptError(f"template '{id}' in config is invalid: {error}") from None


class Templates:
    """The current templates by id, replaced as a whole when config changes."""

    def __init__(self, values: dict[str, Any], system: str = "") -> None:
        self._templates: dict[str, Compiled | PromptError] = {}
        self.replace(values, system)

    def replace(self, values: dict[str, Any], system: str = "") -> None:
        """``values``: each template's config value by id; ``system``: the shared
        system prompt (``compile_template``)."""
        templates: dict[str, Compiled | PromptError] = {}
        for id, value in values.items():
            try:
                templates[id] = compile_template(id, value, system)
            except PromptError as error:
                log.warning("%s", error.message)
                templates[id] = error
        self._templates = templates
        log.info("prompt templates: %s", ", ".join(sorted(templates)) or "none")

    def get(self, id: str) -> Compiled:
        template = self._templates.get(id)
        if isinstance(template, PromptError):
            raise template
        if template is None:
            known = ", ".join(sorted(self._templates)) or "none"
            raise PromptError(f"no prompt template '{id}' (known: {known})", NOT_FOUND)
        return template


def _loads(id: str, text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise PromptError(f"the model's {what} for template '{id}' is not valid JSON "
                          f"({error}): {shown!r}") from None
