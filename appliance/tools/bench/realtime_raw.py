"""The `--realtime` bench's raw baseline: a live turn's stages run one after the other in the
bench's own process, no server, no websocket, no engine processes.

After the server has stopped, the same utterance goes through what the served turn runs:

1. the chat graph's `speech_model`: its `WhisperPipeline` on the clip's 16 kHz samples, as the
   engine configures it (`speech_systems.RawWhisper`); the server's VAD silence wait
   (`silence_duration_ms`) is not a stage and is not run here: the report takes it off the served
   figures (`realtime_figures`);
2. the chat model: its continuous-batching pipeline (`load_pipeline`, as the engine builds it) on
   the prompt the conversation sends (the transcript as the user message after the session's
   instructions, through the model's chat template; greedy, up to the turn's output tokens, ending
   at EOS), read after every `step()`: the time to its first token and to the text that completes
   its first sentence (`Sentences`, as the server cuts it; an answer of one sentence: its end);
3. the voice graph on that first sentence: the time to the audio of its first piece
   (`voice.RawVoice`).

Each stage starts when the one before it ended, so a turn's raw times from the end of speech are
the sums; the first turn is a warm-up (each pipeline's first call is slower), not measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from appliance.dialects.realtime.speaking import Sentences
from appliance.graphfiles import Graph

__all__ = ["RawTurn", "measure_raw_turns"]


@dataclass
class RawTurn:
    """One raw turn: seconds of each stage alone, and what was heard and said."""

    transcribe: float = 0.0
    first_token: float = 0.0
    """From the chat request's start to its first token."""
    first_sentence: float = 0.0
    """From the chat request's start to the text that completes its first sentence."""
    first_audio: float = 0.0
    """From the voice's start on the first sentence to the audio of its first piece."""
    heard: str = ""
    said: str = ""

    @property
    def stages(self) -> dict[str, float]:
        """The turn's stages as the served report names them: seconds from the end of speech,
        each stage starting when the one before it ended."""
        return {
            "transcript": self.transcribe,
            "first_text": self.transcribe + self.first_token,
            "first_sentence": self.transcribe + self.first_sentence,
            "first_audio": self.transcribe + self.first_sentence + self.first_audio,
        }


class _RawChat:
    """The chat graph's pipeline answering one conversation turn, timed by its steps."""

    def __init__(self, graph: Graph, output_tokens: int) -> None:
        import openvino_genai

        from appliance.engine.worker.pipelines import load_pipeline

        self._pipe = load_pipeline(graph)
        self._tokenizer = self._pipe.get_tokenizer()
        self._config = openvino_genai.GenerationConfig()
        self._config.max_new_tokens = output_tokens
        self._config.set_eos_token_id(self._tokenizer.get_eos_token_id())
        self._config.do_sample = False
        self._config.validate()
        self._request_id = 0

    def answer(self, heard: str, instructions: str | None) -> tuple[float, float, str, str]:
        """(seconds to the first token, seconds to the first sentence, that sentence, the whole answer)."""
        import openvino
        import openvino_genai

        messages = ([{"role": "system", "content": instructions}] if instructions else []) + [
            {"role": "user", "content": heard}
        ]
        prompt = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        ids = self._tokenizer.encode(prompt, add_special_tokens=False).input_ids
        self._request_id += 1
        started = time.perf_counter()
        handle = self._pipe.add_request(self._request_id, openvino.Tensor(np.array(ids.data)), self._config)
        generated: list[int] = []
        sentences, said = Sentences(), ""
        first_token = first_sentence = 0.0
        sentence = ""
        while True:
            self._pipe.step()
            if handle.can_read():
                for output in handle.read().values():
                    generated.extend(output.generated_ids)
                if generated and not first_token:
                    first_token = time.perf_counter() - started
                text = self._tokenizer.decode(generated, skip_special_tokens=True)
                completed = sentences.feed(text[len(said) :])
                said = text
                if completed and not first_sentence:
                    first_sentence, sentence = time.perf_counter() - started, completed[0]
            if handle.get_status() != openvino_genai.GenerationStatus.RUNNING:
                break
        if not first_sentence:  # one sentence: the voice starts once the text is complete
            first_sentence = time.perf_counter() - started
            rest = sentences.finish()
            sentence = rest[0] if rest else ""
        return first_token, first_sentence, sentence, said.strip()


def measure_raw_turns(
    chat: Graph,
    speech: Graph,
    voice: Graph,
    samples: np.ndarray,
    rounds: int,
    *,
    output_tokens: int,
    instructions: str | None = None,
    say: Callable[[str], None] = print,
) -> list[RawTurn]:
    """`rounds` raw turns on the clip's 16 kHz `samples`, after one warm-up turn."""
    from appliance.tools.bench.speech_systems import RawWhisper
    from appliance.tools.bench.voice import RawVoice

    say(f"raw: loading {speech.name}, {chat.name} and {voice.name} in this process")
    ears, mouth, answerer = RawWhisper(speech, say), RawVoice(voice), _RawChat(chat, output_tokens)
    turns = []
    for number in range(rounds + 1):
        started = time.perf_counter()
        heard = ears.hear(samples).strip()  # as the server puts it in the conversation
        transcribe = time.perf_counter() - started
        first_token, first_sentence, sentence, said = answerer.answer(heard, instructions)
        first_audio = mouth.first_audio_seconds(sentence)
        turn = RawTurn(transcribe, first_token, first_sentence, first_audio, heard, said)
        say(
            f"raw turn {number}{' (warm-up)' if number == 0 else ''}: "
            + ", ".join(f"{stage} {seconds:.3f} s" for stage, seconds in turn.stages.items())
        )
        if number:
            turns.append(turn)
    ears.close()
    return turns
