"""`DropFreeMetadata`, the course's first step of nbgrader's sanitising pass: a notebook's and
its cells' metadata keep only Jupyter's fields and nbgrader's before anything else runs."""

from __future__ import annotations

from nbformat import from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

# What a notebook's metadata may keep for grading: Jupyter's own fields and nbgrader's. Anything
# else a student's file carries (free fields of any size and nesting) never reaches the steps
# after this one, nor the notebook nbgrader writes into autograded/.
NOTEBOOK_FIELDS = {"kernelspec": ("display_name", "language", "name"),
                   "language_info": ("name", "version", "mimetype", "file_extension",
                                     "pygments_lexer", "nbconvert_exporter")}
CELL_FLAGS = ("collapsed", "deletable", "editable")  # booleans
NBGRADER_FIELDS = ("grade", "solution", "locked", "task", "grade_id", "points",
                   "schema_version", "checksum", "cell_type")
MAX_TAGS, MAX_FIELD_CHARS = 32, 200


def _short_strings(values: dict, keys: tuple[str, ...]) -> dict:
    return {key: values[key] for key in keys
            if isinstance(values.get(key), str) and len(values[key]) <= MAX_FIELD_CHARS}


def kept_notebook_metadata(metadata) -> dict:
    metadata = metadata if isinstance(metadata, dict) else {}
    return {name: _short_strings(metadata[name], keys) for name, keys in NOTEBOOK_FIELDS.items()
            if isinstance(metadata.get(name), dict)}


def kept_cell_metadata(metadata) -> dict:
    metadata = metadata if isinstance(metadata, dict) else {}
    kept = {flag: metadata[flag] for flag in CELL_FLAGS if isinstance(metadata.get(flag), bool)}
    if isinstance(metadata.get("scrolled"), bool) or metadata.get("scrolled") == "auto":
        kept["scrolled"] = metadata["scrolled"]
    hidden = metadata.get("jupyter")
    if isinstance(hidden, dict):
        flags = {key: hidden[key] for key in ("source_hidden", "outputs_hidden")
                 if isinstance(hidden.get(key), bool)}
        if flags:
            kept["jupyter"] = flags
    tags = metadata.get("tags")
    if isinstance(tags, list):
        kept["tags"] = [tag for tag in tags if isinstance(tag, str)
                        and len(tag) <= MAX_FIELD_CHARS][:MAX_TAGS]
    nbgrader = metadata.get("nbgrader")
    if isinstance(nbgrader, dict):
        kept["nbgrader"] = {key: nbgrader[key] for key in NBGRADER_FIELDS if key in nbgrader}
    elif "nbgrader" in metadata:
        kept["nbgrader"] = nbgrader  # nbgrader's check names what is wrong with it
    return kept


class DropFreeMetadata(NbGraderPreprocessor):
    """The first step of the sanitising pass: a notebook's and its cells' metadata keep only
    Jupyter's fields and nbgrader's (`kept_notebook_metadata`, `kept_cell_metadata`)."""

    def preprocess(self, nb, resources):
        nb.metadata = from_dict(kept_notebook_metadata(nb.get("metadata")))
        for cell in nb.cells:
            cell.metadata = from_dict(kept_cell_metadata(cell.get("metadata")))
        return nb, resources
