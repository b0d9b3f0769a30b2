"""Output constraints as EBNF grammars for OpenVINO GenAI's structured output (xgrammar inside).

Every constraint a request can carry (a JSON schema, `json_object`, a regular expression, a
user's EBNF grammar, a forced tool call) is translated here into an EBNF grammar that this package
writes itself. Two engine facts make that necessary:

- A grammar xgrammar cannot compile fails inside `ContinuousBatchingPipeline.step()` and leaves
  the pipeline unusable for every later request; openvino_genai 2026.4 exposes no way to validate
  a grammar first from Python. So nothing user-written reaches the engine verbatim: it is parsed
  here (errors become a 400 naming the field) and re-emitted in a syntax known to compile.
- xgrammar's own JSON-schema grammar allows any amount of whitespace between tokens, and a weak
  model can emit whitespace until the token limit. The grammars written here allow at most one
  space after `:` and `,`.
- xgrammar compiles a new grammar inside the step too, so every stream of the model waits for it:
  grammars are written compactly, in time linear in the constraint's size, and `cost` checks them
  against a budget (character classes, literal text, and the closures of optional items,
  `closure`) before the engine sees them.

Writing is bounded before it starts: what a constraint holds (properties, values, alternatives,
text, nesting; `bounds.INPUT_LIMITS`, a schema counted by `schema_size`) is counted before each part
is converted, and a `RuleSet` stops as soon as its grammar passes its byte budget or its client
has left (`bounds.checkpoint`).

Modules: `ebnf` (writing rules, reading a user's grammar), `bounds` (of one build), `json_schema`,
`schema_size`, `regex`, `cost` with `closure`.

Pure Python: no openvino import.
"""

from appliance.grammar.ebnf import GrammarError, parse_grammar
from appliance.grammar.json_schema import (
    json_object_expression,
    json_object_grammar,
    json_schema_grammar,
    refused_part,
    schema_expression,
)
from appliance.grammar.regex import regex_grammar

__all__ = [
    "GrammarError",
    "json_object_expression",
    "json_object_grammar",
    "json_schema_grammar",
    "parse_grammar",
    "refused_part",
    "regex_grammar",
    "schema_expression",
]
