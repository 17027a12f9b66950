"""A model setting (a folder, a ``"LM.gguf,MMPROJ.gguf"`` pair or a registry name) turned into checked
files."""

from __future__ import annotations

from pathlib import Path

from .._errors import ModelNotFoundError
from ._files import ModelFiles, check_pair, head_beside, is_head
from ._gguf import GGUFInfo, read_gguf_info
from ._registry import REGISTRY_NAME, find_registered, registry_names

__all__ = ["resolve_model"]


def resolve_model(
    spec: str | Path, *, cache_dir: Path | None = None
) -> tuple[ModelFiles, GGUFInfo, GGUFInfo]:
    """Turn a model setting into checked files.

    ``spec`` is a folder holding one language model GGUF and one mmproj GGUF, a pair
    ``"LM.gguf,MMPROJ.gguf"``, or a registry name, found in docvec's cache folder ``cache_dir`` (default:
    ``DOCVEC_CACHE_DIR``'s) and the Hugging Face cache (:func:`docvec._model._registry.find_registered`).

    The multi-vector head, :attr:`ModelFiles.head`: in a folder, the GGUF whose architecture is
    ``docvec.mvhead`` (at most one); for a pair, ``multivector-head.gguf`` in the language model's folder;
    for a registry name, the head it returns, else ``multivector-head.gguf`` beside its language model.
    None when there is none. A head that is not readable, not a head, or of another width is an error
    naming the file (:class:`ModelFileError`, :class:`ModelMismatchError` for the width).
    """
    text = str(spec)
    if "," in text:
        lm_s, mm_s = (s.strip() for s in text.split(",", 1))
        lm, mm = read_gguf_info(Path(lm_s).expanduser()), read_gguf_info(Path(mm_s).expanduser())
        return check_pair(lm, mm, head_beside(lm.path)), lm, mm
    path = Path(text).expanduser()
    if path.is_dir():
        infos = [read_gguf_info(p) for p in sorted(path.glob("*.gguf"))]
        heads = [i for i in infos if is_head(i)]
        lms = [i for i in infos if not i.is_mmproj and not is_head(i)]
        mms = [i for i in infos if i.is_mmproj]
        if len(lms) != 1 or len(mms) != 1:
            found = ", ".join(p.path.name for p in infos) or "no .gguf files"
            raise ModelNotFoundError(
                f"{path}: a model folder holds exactly one language model GGUF and one mmproj GGUF "
                f"(found {found}); name the pair as 'LM.gguf,MMPROJ.gguf' to choose"
            )
        if len(heads) > 1:
            raise ModelNotFoundError(
                f"{path}: a model folder holds at most one multi-vector head "
                f"(found {', '.join(h.path.name for h in heads)})"
            )
        return check_pair(lms[0], mms[0], heads[0] if heads else None), lms[0], mms[0]
    looks_like_path = path.suffix == ".gguf" or "/" in text or "\\" in text or text.startswith((".", "~"))
    if looks_like_path or path.exists():
        raise ModelNotFoundError(
            f"{path}: a model is a folder or a pair 'LM.gguf,MMPROJ.gguf'; "
            "a single file lacks the vision encoder"
            if path.exists()
            else f"{path}: no such file or folder"
        )
    files = find_registered(text, cache_dir=cache_dir)
    if files is None:
        known = [*registry_names(), REGISTRY_NAME]
        if text.lower() not in known:  # a typo, or a name docvec does not know: pulling it can only fail
            raise ModelNotFoundError(
                f"'{text}' is neither a model folder, a 'LM.gguf,MMPROJ.gguf' pair, nor a registry model "
                f"(those are {', '.join(known)}; `docvec models list` shows them)"
            )
        raise ModelNotFoundError(
            f"'{text}' is neither a model folder, a 'LM.gguf,MMPROJ.gguf' pair, nor a downloaded model; "
            f"for a registry model run `docvec models pull {text}` first"
        )
    lm, mm = read_gguf_info(files.language_model), read_gguf_info(files.mmproj)
    head = read_gguf_info(files.head) if files.head is not None else head_beside(lm.path)
    return check_pair(lm, mm, head), lm, mm
