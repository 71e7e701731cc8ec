"""Model and environment text made safe before it is tokenized, logged, printed or written."""

from rlve.reliability.clean_text import clean_messages, terminal_safe, without_surrogates
from rlve.rollout.records import write_text_atomically


def test_surrogates_become_replacement_characters_and_other_fields_stay():
    assert without_surrogates("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    messages = [{"role": "user", "content": "x\ud83d"}, {"role": "tool", "content": None}]
    assert clean_messages(messages) == [{"role": "user", "content": "x\ufffd"},
                                        {"role": "tool", "content": None}]  # fmt: skip


def test_escape_sequences_are_shown_never_obeyed():
    forged = "\x1b[2K\rINFO rlve.loop: step 9\x1b]0;owned\x07 \u202eevil\ud800\tok\n"
    assert terminal_safe(forged) == (
        "\\x1b[2K\\rINFO rlve.loop: step 9\\x1b]0;owned\\x07 \\u202eevil\\ud800\tok\n"
    )


def test_a_file_with_a_lone_surrogate_is_written_with_its_escape(tmp_path):
    path = write_text_atomically(tmp_path / "sample.txt", "printed: \ud800 done")
    assert path.read_text(encoding="utf-8") == "printed: \\ud800 done"
