"""Checks that an exported model folder loads and generates in OpenVINO GenAI."""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_vlm_folder", "probe_model", "probe_retrieval_model", "probe_speech_model"]


def is_vlm_folder(model_dir: Path) -> bool:
    """optimum-intel writes a separate vision-embeddings IR for image-text-to-text models."""
    return (model_dir / "openvino_vision_embeddings_model.xml").is_file()


def probe_model(model_dir: Path, device: str = "CPU") -> str:
    """Load the model, render its chat template and generate two tokens; returns what it did.

    Raises RuntimeError with the library's message when any step fails.
    """
    import openvino_genai

    try:
        if is_vlm_folder(model_dir):
            pipe = openvino_genai.VLMPipeline(str(model_dir), device)
        else:
            pipe = openvino_genai.LLMPipeline(str(model_dir), device)
        tokenizer = pipe.get_tokenizer()
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hello"}], add_generation_prompt=True)
        config = openvino_genai.GenerationConfig(max_new_tokens=2, apply_chat_template=False)
        pipe.generate(prompt, config)
    except Exception as exc:  # the library raises plain RuntimeErrors with useful text
        raise RuntimeError(f"{model_dir} does not load or generate in OpenVINO GenAI: {exc}") from exc
    kind = "VLMPipeline" if is_vlm_folder(model_dir) else "LLMPipeline"
    return f"{kind} on {device}: chat template renders, generation runs"


def probe_retrieval_model(model_dir: Path, pipeline: str) -> str:
    """Load an embedding (TEXT_EMBEDDING) or rerank (TEXT_RERANK) model and run it on one text."""
    import openvino_genai

    try:
        if pipeline == "TEXT_EMBEDDING":
            vector = openvino_genai.TextEmbeddingPipeline(str(model_dir), "CPU").embed_query("Hello")
            return f"TextEmbeddingPipeline on CPU: {len(vector)} dimensions"
        openvino_genai.TextRerankPipeline(str(model_dir), "CPU").rerank("Hello", ["Hello", "Goodbye"])
        return "TextRerankPipeline on CPU: scores two documents"
    except Exception as exc:  # the library raises plain RuntimeErrors with useful text
        raise RuntimeError(f"{model_dir} does not load or run in OpenVINO GenAI: {exc}") from exc


def probe_speech_model(model_dir: Path) -> str:
    """Load a Whisper model and transcribe a second of silence."""
    import openvino_genai

    try:
        openvino_genai.WhisperPipeline(str(model_dir), "CPU").generate([0.0] * 16_000)
    except Exception as exc:  # the library raises plain RuntimeErrors with useful text
        raise RuntimeError(f"{model_dir} does not load or transcribe in OpenVINO GenAI: {exc}") from exc
    return "WhisperPipeline on CPU: transcribes a second of audio"
