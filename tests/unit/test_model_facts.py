"""A model's facts read from its files when its graph is built (`graphfiles.facts`): context, chat
template and what it does with tools, vector size, image rule and marker tokens, each with its
source and a stated default where the files say nothing, never "unknown, so unbounded".

Synthetic folders and GGUF files here; the demo models (e2e) are compared with what the engine's
own tokenizer loads, so the server plans a model's first request as the engine will run it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import Graph, Limits, load_graph
from appliance.graphfiles.chat_template import ChatTemplate, read_chat_template, template_tools
from appliance.graphfiles.facts import DEFAULT_CONTEXT, GGUF_TOKENIZER_TOKENS
from appliance.graphfiles.gguf import DEFAULT_CONTEXT_LENGTH
from tests.unit.test_gguf import gguf_bytes, llama_metadata

TOOLS_TEMPLATE = "{% for tool in tools %}{{ tool | tojson }}{% endfor %}<tool_call>"
PLAIN_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def folder(tmp_path: Path, files: dict[str, object]) -> Path:
    """tmp_path/model, with `files` added (name -> JSON value, or the text of a `.jinja`/`.xml`)."""
    model = tmp_path / "model"
    model.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (model / name).write_text(text, encoding="utf-8")
    return model


def tokenizer_ir(template: str, *, nested: bool = False) -> str:
    """An openvino_tokenizer.xml whose rt_info holds `template` (escaped as the IR writes it)."""
    from xml.sax.saxutils import quoteattr

    value = quoteattr(template)
    entry = (
        f"<chat_template><default value={value} /></chat_template>" if nested else f"<chat_template value={value} />"
    )
    return f'<?xml version="1.0"?>\n<net name="tokenizer" version="11"><layers/><rt_info>{entry}</rt_info></net>\n'


def graph(model: Path, **fields: object) -> Graph:
    return Graph(name="m", model_path=str(model), **fields)


def test_an_ir_folders_context_comes_from_its_config(tmp_path: Path) -> None:
    facts = graph(folder(tmp_path, {"config.json": {"max_position_embeddings": 2048}})).facts
    assert (facts.context, facts.context_source) == (2048, "config.json max_position_embeddings")
    vlm = graph(folder(tmp_path, {"config.json": {"text_config": {"max_position_embeddings": 32768}}})).facts
    assert vlm.context == 32768


def test_a_context_the_files_do_not_give_is_the_stated_default_not_unbounded(tmp_path: Path) -> None:
    for model in (tmp_path / "missing", folder(tmp_path, {"config.json": {"max_position_embeddings": "lots"}})):
        built = graph(model)
        assert built.max_context == DEFAULT_CONTEXT == 4096
        assert "default" in built.facts.context_source
        assert "context 4096 tokens (the default" in built.facts.describe(built.max_context)


def test_the_graph_may_lower_the_context_and_the_npu_cache_bounds_it(tmp_path: Path) -> None:
    model = folder(tmp_path, {"config.json": {"max_position_embeddings": 8192}})
    lowered = graph(model, limits=Limits(max_context=1000))
    assert lowered.max_context == 1000 and lowered.facts.context == 8192
    assert "context 1000 tokens, the model's 8192 tokens" in lowered.facts.describe(lowered.max_context)
    npu = graph(model, device="NPU", plugin_config={"MAX_PROMPT_LEN": 512, "MIN_RESPONSE_LEN": 64})
    assert npu.stateful and npu.max_context == 576


def test_a_gguf_files_context_and_template_come_from_its_metadata(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes(llama_metadata(**{"tokenizer.chat_template": TOOLS_TEMPLATE}), []))
    facts = graph(path).facts
    assert (facts.context, facts.context_source) == (4096, "GGUF llama.context_length")
    assert facts.template_source == "GGUF tokenizer.chat_template"
    assert facts.template.renders_tools and facts.template.tool_parser == "hermes"
    metadata = llama_metadata()
    del metadata["llama.context_length"], metadata["tokenizer.chat_template"]
    path.write_bytes(gguf_bytes(metadata, []))
    bare = graph(path).facts
    assert bare.context == DEFAULT_CONTEXT_LENGTH and "no llama.context_length" in bare.context_source
    assert bare.template_source == "none" and not bare.template.renders_tools
    assert graph(tmp_path / "absent.gguf").max_context == DEFAULT_CONTEXT_LENGTH


def test_a_gguf_graph_serves_no_more_than_the_gguf_tokenizers_8192_tokens(tmp_path: Path) -> None:
    """OpenVINO GenAI's tokenizer for a GGUF file cuts every text at 8,192 tokens: a longer
    context would let prompts reach the model cut short without a word."""
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes(llama_metadata(**{"llama.context_length": 131_072}), []))
    built = graph(path)
    assert built.max_context == built.facts.context == GGUF_TOKENIZER_TOKENS == 8192
    assert "llama.context_length is 131072, cut to 8192" in built.facts.context_source
    path.write_bytes(gguf_bytes(llama_metadata(**{"llama.context_length": 8192}), []))
    assert graph(path).facts.context_source == "GGUF llama.context_length"


def test_the_template_is_found_where_the_tokenizer_finds_it(tmp_path: Path) -> None:
    """tokenizer_config.json, then chat_template.jinja, then the tokenizer IR's rt_info, each
    replacing the one before (openvino.genai `setup_tokenizer`)."""
    model = folder(tmp_path, {"tokenizer_config.json": {"chat_template": "config"}})
    assert read_chat_template(model) == ChatTemplate("config", "tokenizer_config.json")
    folder(
        tmp_path,
        {
            "tokenizer_config.json": {
                "chat_template": [{"name": "rag", "template": "r"}, {"name": "default", "template": "d"}]
            }
        },
    )
    assert read_chat_template(model).text == "d"
    folder(tmp_path, {"chat_template.jinja": "jinja"})
    assert read_chat_template(model) == ChatTemplate("jinja", "chat_template.jinja")
    folder(tmp_path, {"openvino_tokenizer.xml": tokenizer_ir("<|im_start|>{{ 'a' & \"b\" }}\n")})
    assert read_chat_template(model) == ChatTemplate(
        "<|im_start|>{{ 'a' & \"b\" }}\n", "openvino_tokenizer.xml rt_info"
    )
    folder(tmp_path, {"openvino_tokenizer.xml": tokenizer_ir("nested", nested=True)})
    assert read_chat_template(model).text == "nested"
    assert read_chat_template(tmp_path / "missing").source == "none"


def test_what_a_template_does_with_tools_is_read_from_its_code_not_its_text() -> None:
    reads = template_tools("{% if tools %}{{ tools }}{% endif %}{{ message['tool_calls'] }}[TOOL_CALLS]")
    assert (reads.renders_tools, reads.renders_tool_calls, reads.tool_parser) == (True, True, "mistral")
    says = template_tools("{{ 'You may call tools and tool_calls' }}" + PLAIN_TEMPLATE)
    assert (says.renders_tools, says.renders_tool_calls, says.tool_parser) == (False, False, None)


def test_tools_are_planned_from_the_files_before_any_engine(tmp_path: Path) -> None:
    from appliance.engine.host.client import EngineClient

    ignores = EngineClient(graph(folder(tmp_path, {"chat_template.jinja": PLAIN_TEMPLATE})), restart_delay=lambda _: 0)
    assert ignores.state == "stopped" and ignores.pid is None
    assert (ignores.tools.parser, ignores.tools.from_template, ignores.tools.source) == ("hermes", False, "generic")
    assert ignores.max_context == DEFAULT_CONTEXT
    teaches = EngineClient(graph(folder(tmp_path, {"chat_template.jinja": TOOLS_TEMPLATE})), restart_delay=lambda _: 0)
    assert (teaches.tools.parser, teaches.tools.from_template, teaches.tools.source) == (
        "hermes",
        True,
        "chat template",
    )


def _embedding_folder(tmp_path: Path, result_dims: list[str] | None, hidden: int | None = 384) -> Path:
    model = folder(
        tmp_path, {"modules.json": [{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"}]}
    )
    folder(tmp_path, {"config.json": {"hidden_size": hidden} if hidden else {}})
    if result_dims is not None:
        dims = "".join(f"<dim>{dim}</dim>" for dim in result_dims)
        result = f'<layer id="9" type="Result" output_names="last_hidden_state"><input><port id="0">{dims}</port></input></layer>'
        other = '<layer id="8" type="Result" output_names="pooler_output"><input><port id="0"><dim>-1</dim><dim>7</dim></port></input></layer>'
        folder(tmp_path, {"openvino_model.xml": f'<?xml version="1.0"?><net><layers>{other}{result}</layers></net>'})
    return model


def test_an_embedding_models_vector_size_comes_from_its_ir_output(tmp_path: Path) -> None:
    facts = graph(_embedding_folder(tmp_path, ["-1", "-1", "768"]), pipeline="TEXT_EMBEDDING").facts
    assert (facts.embedding_size, facts.embedding_size_source) == (768, "openvino_model.xml output")
    assert facts.context == 512  # tokens per text: OpenVINO GenAI's default max_length, the files giving none


def test_without_a_static_output_the_vector_size_is_the_hidden_size_else_measured_when_loaded(tmp_path: Path) -> None:
    facts = graph(_embedding_folder(tmp_path, ["-1", "-1", "-1"]), pipeline="TEXT_EMBEDDING").facts
    assert (facts.embedding_size, facts.embedding_size_source) == (384, "config.json hidden_size")
    unknown = graph(_embedding_folder(tmp_path / "bare", None, hidden=None), pipeline="TEXT_EMBEDDING").facts
    assert unknown.embedding_size == 0 and "vectors of unknown until loaded dimensions" in unknown.describe(512)


def test_dimensions_longer_than_the_models_vectors_are_refused(tmp_path: Path) -> None:
    model = _embedding_folder(tmp_path, ["-1", "-1", "384"])
    path = tmp_path / "embed.toml"
    path.write_text(
        f'name = "e"\nmodel_path = "{model}"\npipeline = "TEXT_EMBEDDING"\n[embedding]\ndimensions = [128, 512]\n'
    )
    with pytest.raises(ConfigError, match=r"`embedding.dimensions` 512 is longer than the model's vectors \(384"):
        load_graph(path)


QWEN_CONFIG = {"model_type": "qwen2_vl", "vision_start_token_id": 5, "image_token_id": 7, "video_token_id": 8}
QWEN_PROCESSOR = {"min_pixels": 3136, "max_pixels": 50176, "patch_size": 14, "merge_size": 2}


def test_a_vision_models_image_rule_and_marker_tokens_come_from_its_folder(tmp_path: Path) -> None:
    added = [{"id": 5, "content": "<|vision_start|>"}, {"id": 7, "content": "<|image_pad|>"}]
    model = folder(
        tmp_path,
        {
            "config.json": QWEN_CONFIG,
            "preprocessor_config.json": QWEN_PROCESSOR,
            "tokenizer.json": {"added_tokens": added},
            "tokenizer_config.json": {"added_tokens_decoder": {"8": {"content": "<|video_pad|>"}}},
            "openvino_vision_embeddings_model.xml": "<net/>",
        },
    )
    built = graph(model)
    assert built.accepts_images
    facts = built.facts
    assert facts.vision_tokens == ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>")
    assert facts.image_rule is not None and facts.image_rule.fit(4096, 4096) == (224, 224)
    assert "Qwen2-VL grid" in facts.describe(built.max_context)
    (model / "tokenizer_config.json").write_text("{}")
    unspelled = graph(model).facts
    assert unspelled.vision_tokens is None  # the engine decodes the ids once loaded
    assert "read by the engine once loaded" in unspelled.describe(4096)


def test_a_text_graph_has_no_image_facts(tmp_path: Path) -> None:
    facts = graph(folder(tmp_path, {"config.json": QWEN_CONFIG, "preprocessor_config.json": QWEN_PROCESSOR})).facts
    assert facts.image_rule is None and facts.vision_tokens == () and not facts.accepts_images


def test_the_demo_models_facts_are_what_the_engines_tokenizer_loads(demo_root, smol_root, retrieval_root) -> None:
    """Every demo model: the template the engine's tokenizer loads (after its own remapping) is
    the one read from the files, so the tools plan is the same before and after a load."""
    import openvino_genai

    from appliance.graphfiles.vision import native_token_ids

    graphs = [
        load_graph(path)
        for root in (demo_root, smol_root, retrieval_root)
        for path in sorted((root / "graphs").glob("*.toml"))
    ]
    assert {g.name for g in graphs} >= {
        "demo-chat",
        "demo-vision",
        "demo-spec",
        "demo-lookup",
        "demo-smol",
        "demo-embed",
        "demo-rerank",
    }
    for built in graphs:
        tokenizer = openvino_genai.Tokenizer(str(built.model_dir))
        if built.task == "generate":
            assert built.facts.template == template_tools(tokenizer.chat_template or ""), built.name
        if built.accepts_images:
            decoded = [
                tokenizer.decode([token], skip_special_tokens=False) for token in native_token_ids(built.model_dir)
            ]
            assert built.facts.vision_tokens == tuple(text for text in decoded if text.strip())
    by_name = {g.name: g for g in graphs}
    assert by_name["demo-smol"].max_context == 8192 and not by_name["demo-smol"].facts.template.renders_tools
    assert by_name["demo-chat"].max_context == 2048 and by_name["demo-chat"].facts.template.renders_tools
    assert by_name["demo-embed"].facts.embedding_size == 384
    assert by_name["demo-vision"].facts.image_rule is not None


def test_the_engine_confirms_the_facts_and_a_difference_is_logged(tmp_path: Path, caplog) -> None:
    """What the loaded engine reports (`Ready`) is compared with the files' facts: the same facts
    change nothing; a template the tokenizer swapped is logged and the engine's reading is kept."""
    from appliance.engine.host.client import EngineClient
    from appliance.engine.messages import Ready

    model = folder(tmp_path, {"config.json": {"max_position_embeddings": 2048}, "chat_template.jinja": TOOLS_TEMPLATE})
    engine = EngineClient(graph(model), restart_delay=lambda _: 0)
    before = engine.tools
    same = Ready(max_context=2048, load_seconds=0.1, template_renders_tool_calls=False, template_tool_parser="hermes")
    with caplog.at_level("WARNING", logger="appliance.engine"):
        engine._dispatch(same)
    assert engine.tools == before and engine.max_context == 2048 and not caplog.records
    swapped = Ready(max_context=2048, load_seconds=0.1, template_renders_tools=False, template_renders_tool_calls=False)
    with caplog.at_level("WARNING", logger="appliance.engine"):
        engine._dispatch(swapped)
    assert not engine.tools.from_template and engine.tools.source == "generic"
    assert "the loaded model's tools is" in caplog.text and "its files said" in caplog.text


def test_an_embedding_size_the_files_do_not_give_is_taken_from_the_engine_silently(tmp_path: Path, caplog) -> None:
    from appliance.engine.host.client import EngineClient
    from appliance.engine.messages import Ready

    engine = EngineClient(
        graph(_embedding_folder(tmp_path, None, hidden=None), pipeline="TEXT_EMBEDDING"), restart_delay=lambda _: 0
    )
    assert engine.embedding_size == 0 and engine.max_context == 512
    with caplog.at_level("WARNING", logger="appliance.engine"):
        engine._dispatch(Ready(max_context=512, load_seconds=0.1, embedding_size=312))
    assert engine.embedding_size == 312 and not caplog.records
