"""An MCPKit server publishing the skills under the directory named by ``SKILLS_DIR`` (``app.add_skills``), served
over stdio by ``python tests/support/servers/skills_dir_server.py``. ``SKILLS_MAX_FILE_BYTES``, when set, is passed
as ``max_file_bytes``."""

from __future__ import annotations

import os

from mcpkit import MCPKit

app = MCPKit("skills-dir")
_limit = os.environ.get("SKILLS_MAX_FILE_BYTES")
if _limit:
    app.add_skills(os.environ["SKILLS_DIR"], max_file_bytes=int(_limit))
else:
    app.add_skills(os.environ["SKILLS_DIR"])

if __name__ == "__main__":
    app.run()
