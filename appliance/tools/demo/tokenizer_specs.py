"""The demo models' tokenizers: special tokens, chat templates and `TokenizerSpec`.

A random-weight demo trains its byte-level BPE tokenizer locally (`export`); these are its settings.
`CHAT_TOKENIZER` is demo-chat's, shared by every model that must speak its vocabulary (a draft).
"""

from __future__ import annotations

from dataclasses import dataclass

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|im_end|>"
# Order matters: special tokens take the first ids (pad 0, bos 1, eos 2, ...).
EXTRA_SPECIAL_TOKENS = ("<|im_start|>", "<|endoftext|>", "<tool_call>", "</tool_call>")

# ChatML with a leading bos_token. With `tools`, a system turn lists them as JSON (after the
# caller's own system message, if any). Assistant turns that carry `tool_calls` render each call as
# <tool_call>{"name": ..., "arguments": {...}}</tool_call> so multi-turn tool use round-trips; a
# null content (usual next to tool_calls) renders as nothing rather than "None". `arguments` may
# arrive as a JSON string (OpenAI style; Python jinja2 keeps it a string) or as an object
# (openvino_genai's template engine parses it): both render the same.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n\n{% endif %}"
    # One tool per line. The newline goes AFTER each tool: both jinja2 as transformers configures it
    # and openvino_genai's engine use trim_blocks, which eats a newline right after a block tag.
    "You may call tools:\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "<|im_end|>\n"
    "{% elif messages[0]['role'] == 'system' %}"
    "<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": {{ call['function']['name'] | tojson }}, \"arguments\": "
    "{% if call['function']['arguments'] is string %}{{ call['function']['arguments'] }}"
    "{% else %}{{ call['function']['arguments'] | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# CHAT_TEMPLATE with every message rendered where it stands, system messages after the first
# included (as SmolLM2's and Qwen3's templates do): Claude Code sends its environment as a system
# message after the user's, and a template that dropped it would hide that from the model.
IN_PLACE_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<|im_start|>system\nYou may call tools:\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": {{ call['function']['name'] | tojson }}, \"arguments\": "
    "{% if call['function']['arguments'] is string %}{{ call['function']['arguments'] }}"
    "{% else %}{{ call['function']['arguments'] | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ChatML as Qwen2-VL writes it (no bos_token). Content is usually a string in which the serving
# path has already put OpenVINO GenAI's `<ov_genai_image_N>` tags; a list of parts (transformers
# style) renders each image part as Qwen2-VL's own vision block.
VISION_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VISION_SPECIAL_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


@dataclass(frozen=True)
class TokenizerSpec:
    """A byte-level BPE tokenizer trained locally (no download) on licence texts and stdlib code.

    Training is deterministic for a given corpus, so two recipes holding equal specs (a draft model
    and its main model) get identical vocabularies.
    """

    vocab_size: int
    model_max_length: int
    # How many stdlib *.py files (sorted by name) join /usr/share/common-licenses in the corpus.
    stdlib_files: int = 60
    bos_token: str = BOS_TOKEN
    eos_token: str = EOS_TOKEN
    pad_token: str = PAD_TOKEN
    extra_special_tokens: tuple[str, ...] = EXTRA_SPECIAL_TOKENS
    chat_template: str = CHAT_TEMPLATE


# Shared by demo-chat and any model that must speak its vocabulary (e.g. a speculative draft).
CHAT_TOKENIZER = TokenizerSpec(vocab_size=4096, model_max_length=2048, stdlib_files=60)
