"""The stages of a search, in the order they run (`RETRIEVAL` inside the CPU budget, then `FINISHING`).

Each is declared in retrieval.search.pipeline's terms, in the module that does its work: a name, a
line of help, what it reads and writes, when it applies (a `When`), and what it does. `PIPELINE` is
the one order: `manage.py search --explain` prints it, the "why" view names its steps.
"""

from retrieval.search.coverage import Covered
from retrieval.search.late_interaction import LateInteraction
from retrieval.search.memory_kinds import MemoryKinds
from retrieval.search.methods import Retrieve
from retrieval.search.multilingual import Multilingual
from retrieval.search.participants import Participant
from retrieval.search.query_bridge import QueryBridge
from retrieval.search.pipeline import Context, Cut, Floor, Neighbours, RawMessages, Ranks
from retrieval.search.rerank import Rerank
from retrieval.search.tense import Tense

# Retrieval and the stages that rescore its candidates run inside the CPU budget; the rest after it.
RETRIEVAL = (QueryBridge(), Retrieve(), LateInteraction(), Multilingual(), Covered(), Cut(), MemoryKinds())
FINISHING = (Floor(), Rerank(), Tense(), Context(), Neighbours(), Participant(), Ranks(), RawMessages())
PIPELINE = RETRIEVAL + FINISHING
