"""The corpus and questions of ``bench.structured``: twenty short documents of
invented facts (so a right answer must come from the documents, not from what the
model learnt), each one chunk, each with a question whose answer is in it, the
substring that answer must contain, and a question that asks two things at once
(for query decomposition). ``ASK`` adds questions for the ``ask`` pattern's other
routes.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    id: str  # the document id (one chunk: "<id>/c0")
    title: str
    text: str
    question: str
    expected: str  # found in a right answer, case-insensitively
    compound: str  # two questions in one, for query-decompose


FACTS = [
    Fact("velmora-lighthouse.txt", "Velmora Lighthouse",
         "The Velmora Lighthouse stands on Cape Orrin, at the northern tip of the island "
         "of Velmora. The engineer Tobias Renn built it in 1871. Its lamp can be seen 38 "
         "kilometres out at sea, and its keepers were the Amsel family until 1954.",
         "Who built the Velmora Lighthouse?", "Tobias Renn",
         "Who built the Velmora Lighthouse and how far out at sea can its lamp be seen?"),
    Fact("quillfeather-tea.txt", "Quillfeather Tea",
         "Quillfeather tea is a black tea grown in the Harvel Valley. Its leaves are "
         "harvested in October, after the first frost, and dried over cedar smoke. The "
         "Harvel Growers' Cooperative sells most of the crop to Tarsk.",
         "In which month is Quillfeather tea harvested?", "October",
         "When is Quillfeather tea harvested and over what is it dried?"),
    Fact("brannock-bridge.txt", "Brannock Bridge",
         "Brannock Bridge carries the coast road across the River Selt. It is 412 metres "
         "long and was opened in 1932 by the mayor of Selton, Edith Crane. It replaced a "
         "ferry that had run since 1790.",
         "How long is Brannock Bridge?", "412",
         "How long is Brannock Bridge and who opened it?"),
    Fact("lake-miren.txt", "Lake Miren",
         "Lake Miren is a mountain lake whose deepest point lies 214 metres below the "
         "surface. It is fed by the River Tallow and drained by the Miren Falls. Brown "
         "trout and Arctic char live in its cold water.",
         "Which river feeds Lake Miren?", "Tallow",
         "Which river feeds Lake Miren and how deep is the lake?"),
    Fact("ilse-varga.txt", "Ilse Varga",
         "Ilse Varga was a composer from the city of Doran. She wrote the opera The Glass "
         "Orchard, first performed in Lisbon in 1958, and three string quartets. She "
         "taught composition at the Doran Conservatory for thirty years.",
         "Which opera did Ilse Varga write?", "Glass Orchard",
         "Which opera did Ilse Varga write and where was it first performed?"),
    Fact("nordhaven-robotics.txt", "Nordhaven Robotics",
         "Nordhaven Robotics is a company founded in 2009 by Priya Castell in Aberdeen. "
         "It makes underwater drones called Seal-7, which inspect the legs of offshore "
         "wind turbines. The company employs about 140 people.",
         "Who founded Nordhaven Robotics?", "Priya Castell",
         "Who founded Nordhaven Robotics and what drones does it make?"),
    Fact("kestrel-3.txt", "Kestrel-3",
         "Kestrel-3 is a small weather satellite launched in 2017. It studies the ozone "
         "layer from an orbit 680 kilometres high and sends its readings to a ground "
         "station at Skarvik. It was built by the Tessel Space Institute.",
         "What does the Kestrel-3 satellite study?", "ozone",
         "What does Kestrel-3 study and who built it?"),
    Fact("amara-okafor.txt", "Amara Okafor",
         "Dr Amara Okafor is a biochemist at the University of Tessel. In 1994 she "
         "discovered the enzyme lumerase, which lets certain deep-sea bacteria glow. She "
         "later led the university's marine biology department.",
         "Which enzyme did Amara Okafor discover?", "lumerase",
         "Which enzyme did Amara Okafor discover and in which year?"),
    Fact("brisk-lantern-festival.txt", "The Lantern Festival of Brisk",
         "The town of Brisk holds its Lantern Festival every March. About 6,000 paper "
         "lanterns are floated down the River Brisk on the festival's last night. The "
         "festival began in 1921 to mark the end of the winter floods.",
         "In which month is the Lantern Festival held in Brisk?", "March",
         "When is the Lantern Festival held in Brisk and how many lanterns are floated?"),
    Fact("gorran-cheese.txt", "Gorran Cheese",
         "Gorran is a hard cheese made from goat's milk. Wheels of it are aged for nine "
         "months in the caves of Mount Ardel, which keep a steady temperature of 9 "
         "degrees. It is eaten with quince paste.",
         "What milk is Gorran cheese made from?", "goat",
         "What milk is Gorran cheese made from and how long is it aged?"),
    Fact("tessellate-language.txt", "Tessellate",
         "Tessellate is a programming language created by Jonas Weir in 2011. It "
         "compiles to WebAssembly and is used to write browser games. Its package "
         "manager is called Tile.",
         "What does the Tessellate language compile to?", "WebAssembly",
         "Who created the Tessellate language and what does it compile to?"),
    Fact("harbour-at-dusk.txt", "Harbour at Dusk",
         "Harbour at Dusk is an oil painting by Marguerite Solle, finished in 1903. It "
         "shows fishing boats returning to the port of Ostend. The painting is kept in "
         "the Rennet Museum in Ghent.",
         "Where is the painting Harbour at Dusk kept?", "Rennet Museum",
         "Who painted Harbour at Dusk and where is it kept?"),
    Fact("calder-express.txt", "The Calder Express",
         "The Calder Express is a train that runs between Farrow and Linmouth. The "
         "journey takes three hours and twenty minutes. The service has run since 1988 "
         "and stops only at Calder Junction on the way.",
         "Which city does the Calder Express run to from Farrow?", "Linmouth",
         "Which cities does the Calder Express connect and how long is the journey?"),
    Fact("sunfin-parrot.txt", "Sunfin Parrot",
         "The sunfin parrot is a bird of the forests of Isla Verdana. It eats mostly "
         "wild figs, and its wingspan is about 40 centimetres. Its orange tail feathers "
         "give it its name.",
         "What does the sunfin parrot eat?", "fig",
         "Where does the sunfin parrot live and what does it eat?"),
    Fact("mount-ardel.txt", "Mount Ardel",
         "Mount Ardel is 2,947 metres high. It was first climbed in 1899 by the "
         "mountaineer Hedda Lund, who reached the summit by its east ridge. The caves on "
         "its lower slopes are used to age cheese.",
         "Who first climbed Mount Ardel?", "Hedda Lund",
         "Who first climbed Mount Ardel and how high is it?"),
    Fact("pellam-library.txt", "Pellam Library",
         "The Pellam Library holds 1.2 million books and a collection of medieval maps. "
         "It was founded in 1820 by Bishop Aldric Moss. Its reading room has a glass dome "
         "24 metres across.",
         "How many books does the Pellam Library hold?", "1.2 million",
         "How many books does the Pellam Library hold and who founded it?"),
    Fact("orin-vale-fc.txt", "Orin Vale Football Club",
         "Orin Vale Football Club plays its home games at Greyfield Stadium, which holds "
         "18,500 people. The club's nickname is the Herons, after the birds of the "
         "nearby marshes. It won the national cup in 1977.",
         "What is the nickname of Orin Vale Football Club?", "Herons",
         "What is Orin Vale Football Club's nickname and where does it play?"),
    Fact("sable-mine.txt", "Sable Mine",
         "The Sable Mine produced tin for over a century. It closed in 1961, after a "
         "flood filled its lower galleries. Its engine house is now a museum of Cornish "
         "mining.",
         "What metal did the Sable Mine produce?", "tin",
         "What did the Sable Mine produce and why did it close?"),
    Fact("saffron-gate.txt", "Saffron Gate",
         "The chef Rosa Demir runs the restaurant Saffron Gate in Izmir. The restaurant "
         "won its first star in 2015 and is known for lamb cooked in clay pots. Demir "
         "trained in Lyon.",
         "Which restaurant does the chef Rosa Demir run?", "Saffron Gate",
         "Which restaurant does Rosa Demir run and when did it win its first star?"),
    Fact("harvel-wind-farm.txt", "Harvel Valley Wind Farm",
         "The Harvel Valley wind farm has 44 turbines that together produce 130 "
         "megawatts. It is operated by Northwind Energy and was completed in 2019. The "
         "nearest town is Harvel Bridge, five kilometres to the south.",
         "How many turbines does the Harvel Valley wind farm have?", "44",
         "How many turbines does the Harvel Valley wind farm have and who operates it?"),
]

# The ask pattern: (question, the route it should take). Most are knowledge
# questions of the corpus; some are code and conversation.
ASK = [(fact.question, "knowledge") for fact in FACTS[:14]] + [
    ("Write a Python function that reverses a string.", "code"),
    ("How do I count the lines of a file in bash?", "code"),
    ("Fix this SQL: SELECT name FROM users WHERE age > 30 ORDER name;", "code"),
    ("Hello! How are you today?", "conversational"),
    ("Thank you, that was helpful.", "conversational"),
    ("Good morning!", "conversational"),
]
