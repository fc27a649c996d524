"""Skills with mcpkit: the Agent Skills under this directory, served over MCP (the io.modelcontextprotocol/skills
extension) in both protocol eras.

    mcpkit skills examples/skills/server.py                     # list them
    mcpkit skills examples/skills/server.py pdf-processing      # load one: its SKILL.md, verified
    mcpkit inspect examples/skills/server.py                    # every file is a resource

Each file is a resource ``skill://<skill-path>/<file>``; ``skills/list`` and ``skills/get`` return each skill's
frontmatter and the digest and size of every file; ``resources/directory/read`` lists a directory.
"""

from __future__ import annotations

from pathlib import Path

from mcpkit import MCPKit

app = MCPKit("skills-demo", instructions="Skills for Git, PDF documents and refunds: see skills/list.")
app.add_skills(Path(__file__).resolve().parent, directory_read=True)

if __name__ == "__main__":
    app.run()
