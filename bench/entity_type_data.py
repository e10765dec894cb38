"""Templated training mentions for the entity typer (entities/typing_model.py), English and Chinese.

Every sentence here is *generated* (source "templated"): templates written for this purpose, with
slots filled from the repository's own lexicons — entities/data (US Census given names, MIT;
GeoNames places, CC BY 4.0), the company generators and word lists of bench/statement_data.py — and
word lists composed here (surnames, work-title patterns, events, products, demonyms, breeds, dishes).
Nothing is read from bench/entities_gold.json, LoCoMo or any other labelled set: those are the checks.

A template holds slots `{person}`, `{place}`, `{org}`, `{work}`, `{other}` or `{any}` (any of the five,
for a context that does not tell), and sub-kinds that say what fills them (`{team}`, `{book}`,
`{event}`, …; each maps to one of the five types in KIND). `generate()` returns sentences with their
slot spans; bench/train_entity_types.py runs `find_mentions` on each and labels every mention that
lies inside a slot with the slot's type — the candidates are the rules' own, as at run time.
"""

import random
import re

from bench.statement_data import Lexicon

TYPES = ("person", "place", "organization", "work", "other")
KIND = {
    "person": "person", "place": "place", "org": "organization", "team": "organization", "brand": "organization",
    "company": "organization", "school": "organization", "work": "work", "book": "work", "film": "work",
    "song": "work", "game": "work", "painting": "work", "show": "work", "other": "other", "event": "other",
    "product": "other", "demonym": "other", "pet": "other", "breed": "other", "dish": "other", "any": None,
    "same": None, "namework": "work",
}

# --- English word lists (composed here) -----------------------------------------------------------

_SURNAMES = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez "
             "Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark "
             "Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams "
             "Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Patel Shah Kim Park Chen Wang Li Zhang Liu "
             "Tanaka Sato Suzuki Yamamoto Mueller Schmidt Schneider Fischer Weber Becker Rossi Russo Ferrari "
             "Dubois Laurent Moreau Petrov Ivanov Volkov Kowalski Novak Jensen Hansen Larsen Olsen Silva Santos "
             "Costa Oliveira Haddad Khan Ali Hussein Okafor Mensah Dlamini O'Brien Murphy Kelly Sullivan "
             "McCarthy Fitzgerald Gallagher Dawson Holloway Whitaker Pemberton Ashford Thornton Caldwell").split()
_HISTORIC = ("Rollo Charlemagne Aristotle Plato Socrates Confucius Cleopatra Napoleon Galileo Copernicus Tesla "
             "Edison Newton Darwin Einstein Euclid Archimedes Ptolemy Augustus Justinian Saladin Tamerlane "
             "Genghis Attila Hannibal Pericles Leonidas Boudica Hadrian Constantine Theodoric Alaric Clovis "
             "Pepin Canute Harald Olaf Ragnar Bjorn Magnus Sigurd Gustav Casimir Sobieski Kosciuszko Garibaldi "
             "Bismarck Metternich Talleyrand Robespierre Voltaire Rousseau Descartes Pascal Spinoza Leibniz Kant "
             "Hegel Nietzsche Goethe Schiller Beethoven Mozart Chopin Liszt Verdi Puccini Rembrandt Vermeer "
             "Caravaggio Michelangelo Raphael Donatello Leonardo Dante Petrarch Boccaccio Cervantes Shakespeare "
             "Milton Chaucer Keats Byron Shelley Tolstoy Dostoevsky Chekhov Pushkin Gogol Tagore Gandhi Nehru").split()
_TITLES = "Dr. Mr. Mrs. Ms. Prof. Professor President Senator Governor Mayor Judge Captain General King Queen Prince Princess Duke Saint Sir Lady Uncle Aunt Coach".split()
_PLACE_TAILS = ("River Lake Mountains Valley Island Islands Bay Beach Park Street Avenue Road County Province "
                "Falls Canyon Forest Desert Peninsula Heights Harbor Square Station Airport Springs Hills Coast").split()
_PLACE_HEADS = ("Lake Mount Port Fort San Santa New North South East West Saint").split()
_COUNTRYISH = ("Normandy Brittany Aquitaine Burgundy Flanders Bavaria Saxony Prussia Bohemia Moravia Silesia "
               "Galicia Andalusia Catalonia Lombardy Tuscany Sicily Sardinia Corsica Crete Cyprus Anatolia Persia "
               "Mesopotamia Babylon Byzantium Carthage Macedonia Thrace Dalmatia Wallachia Transylvania Siberia "
               "Manchuria Tibet Bengal Punjab Kashmir Deccan Yucatan Patagonia Amazonia Scandinavia Iberia "
               "Lapland Cornwall Yorkshire Kent Essex Wessex Mercia Northumbria Ulster Munster Leinster "
               "Connacht Gaul Hispania Britannia Germania Judea Galilee Sinai Arabia Nubia Abyssinia Zanzibar "
               "Borneo Sumatra Java Luzon Mindanao Hokkaido Kyushu Okinawa Tasmania Queensland Ontario Quebec "
               "Alberta Manitoba Yukon Greenland Iceland Faroe Svalbard Riviera Provence Alsace Lorraine Picardy "
               "Champagne Tyrol Styria Carinthia Carpathia Balkans Caucasus Crimea Ruhr Rhineland").split()
_CO_WORDS = ("Inc. Corp. Ltd. Group Holdings Technologies Systems Labs Partners Capital Foundation Institute "
             "Association Society Council Agency Bank Airlines Motors Pharmaceuticals Studios Records Press "
             "Publishing Media Network Entertainment Energy Industries Electric Insurance").split()
_ORG_PATTERNS = ("University of {P}|{P} University|{P} State University|{P} College|{P} Institute of Technology|"
                 "{P} High School|{P} Community College|{P} General Hospital|{P} Medical Center|Bank of {P}|"
                 "{P} City Council|{P} Public Library|{P} Museum of Art|{P} Symphony Orchestra|{P} Times|"
                 "{P} Herald|{P} Gazette|{P} Chamber of Commerce|Ministry of {N}|Department of {N}|"
                 "{P} Historical Society|Royal {N} Society|National {N} Association|{N} Party|"
                 "{P} Police Department|{P} Fire Department|{P} Board of Education|{P} Railway|{P} Airways").split("|")
_ORG_N = ("Defense Health Education Agriculture Commerce Labor Justice Energy Transport Finance Culture Science "
          "Geographic Astronomical Chemical Medical Democratic Republican Liberal Conservative Labour Green "
          "Socialist Progressive Historical Botanical").split()
_ACRONYMS = "NASA UNESCO NATO FIFA UEFA WHO IMF OPEC BBC CNN NBA NFL MLB NHL IBM HSBC BMW IKEA UCLA MIT NYU EU UN".split()
_TEAM_ANIMALS = ("Wolves Bears Eagles Hawks Lions Tigers Sharks Falcons Ravens Panthers Giants Rangers Rovers "
                 "Wanderers Warriors Knights Kings Stars Comets Rockets Thunder Storm Bulls Jets Pirates Cardinals "
                 "Dolphins Vikings Titans Raiders Chargers Broncos Mustangs Stallions Huskies Wildcats Hornets").split()
_BRANDS = ("Nike Adidas Puma Reebok Gatorade Starbucks Costco Walmart Target Ikea Lego Toyota Honda Ford Tesla "
           "Samsung Sony Nintendo Netflix Spotify Amazon Google Apple Microsoft Uber Airbnb Zara Gucci Prada "
           "Chanel Rolex Heineken Coca-Cola Pepsi Nestle Unilever Visa Mastercard Patagonia Lululemon "
           "Fabricon Zentrix Lumora Brightlane Corvana Velmont Quistar Orvella Kaldor Trevana").split()
_ADJ = ("Silent Hidden Last Lost Broken Golden Dark Bright Endless Forgotten Secret Wild Little Great Burning "
        "Frozen Crimson Eternal Quiet Distant Hollow Shattered Sacred Wandering Midnight Scarlet Iron Silver "
        "Invisible Restless Fallen Electric Beautiful Lonely Bitter Sweet Final Ancient Infinite").split()
_NOUNS = ("Garden River City Kingdom Empire Night Day Road Sea Storm Star Moon Sun Heart Shadow Light Fire Crown "
          "Dream Song Tide Forest House Door Window Mirror Bridge Tower Island Winter Summer Rain Wind Ghost Sword "
          "Journey Promise Memory Voice Game Legacy Horizon Dawn Harvest Orchard Labyrinth Symphony Letters "
          "Chronicles Saga Odyssey Legend Requiem Ballad Frontier Nocturne Lullaby Portrait Stranger Witness").split()
_VERBS_ING = "Finding Chasing Waiting Running Breaking Becoming Remembering Leaving Dancing Falling Saving Hunting Catching".split()
_WORK_PATTERNS = ("The {A} {N}|{A} {N}|The {N} of {N}|{N} of the {A} {N}|A {N} for {N}|{V} {N}|{V} the {N}|"
                  "The {N}|{N}s|{A} {N}s|The {N}'s {N}|{N} and {N}|{N} in {P}|The Last {N}|{N}: {A} {N}|"
                  "{N} II|{A} {N} 2|{N} Chronicles|Return to {N}|Beyond the {N}|Under the {A} {N}|"
                  "{Name}'s {N}|Dear {Name}|Letters to {Name}|The {N} Girl|{A} Nights|{N} Wars").split("|")
_GAME_SUFFIX = (": Origins|: Reborn| Online| Legends| Tactics| Simulator| Arena| 2| III| Remastered| Heroes|"
                ": Global Offensive| Kart| Quest| Odyssey").split("|")
_EVENTS = ("Christmas|Thanksgiving|Easter|Halloween|Hanukkah|Ramadan|Diwali|Passover|New Year's Eve|"
           "Valentine's Day|Mother's Day|Father's Day|Independence Day|Memorial Day|Labor Day|Super Bowl|"
           "World Cup|Olympics|Winter Olympics|Wimbledon|Tour de France|Coachella|Comic-Con|Black Friday|"
           "Oktoberfest|Mardi Gras|Burning Man|Renaissance|Reformation|Industrial Revolution|Cold War|"
           "Great Depression|Middle Ages|Enlightenment|Crusades|Holocaust|Brexit|Lent|Advent|Pride Month").split("|")
_EVENT_PATTERNS = ("{P} Marathon|{P} Film Festival|{P} Jazz Festival|{P} Book Fair|{P} Open|Battle of {P}|"
                   "Siege of {P}|Treaty of {P}|Council of {P}|{P} Conference|{P} Summit|{P} Grand Prix|"
                   "{P} Half Marathon|{P} Pride Parade|{N} Festival|{N} Week").split("|")
_PRODUCTS = ("iPhone|iPad|MacBook|Kindle|PlayStation|Xbox|Switch|Galaxy S24|Pixel|AirPods|Roomba|Prius|Corolla|"
             "Civic|Model 3|Fitbit|GoPro|Instant Pot|Vitamix|Windows|Android|Excel|Photoshop|Linux|ChatGPT|"
             "Zoom|Slack|WhatsApp|Instagram|TikTok|Facebook|Twitter|YouTube|Reddit|Discord|Tinder|Venmo|Duolingo|"
             "Peloton|Nespresso|Tylenol|Advil|Lipitor|Ozempic|Boeing 747|Airbus A380").split("|")
_PRODUCT_PATTERNS = ("{B} {X}|{B} {X} Pro|{B} {X} {D}|{B} {X} Max|{X} {D}|{X} {D} Plus").split("|")
_PRODUCT_X = "Air Nova Aero Flex Ultra Zen Pulse Spark Edge Wave Glide Bolt Echo Vista Core".split()
_DEMONYMS = ("American British English French German Italian Spanish Portuguese Dutch Belgian Swiss Austrian "
             "Swedish Norwegian Danish Finnish Icelandic Irish Scottish Welsh Polish Czech Slovak Hungarian "
             "Romanian Bulgarian Greek Turkish Russian Ukrainian Chinese Japanese Korean Vietnamese Thai Indian "
             "Pakistani Persian Arab Egyptian Moroccan Nigerian Kenyan Ethiopian Mexican Brazilian Argentine "
             "Chilean Peruvian Colombian Cuban Canadian Australian Norman Viking Roman Byzantine Ottoman Frankish "
             "Celtic Saxon Anglo-Saxon Gothic Mongol Aztec Inca Maya Catholic Protestant Muslim Christian Jewish "
             "Buddhist Hindu Latin Hebrew Sanskrit Mandarin Cantonese Swahili Bengali Tamil Gaelic Basque").split()
_RELIGIONS = ("Christianity Islam Buddhism Hinduism Judaism Catholicism Protestantism Taoism Confucianism Sikhism "
              "Marxism Communism Capitalism Impressionism Romanticism Baroque Gothic Modernism Stoicism").split()
_BREEDS = ("Golden Retriever|Labrador|German Shepherd|Beagle|Poodle|Bulldog|Corgi|Husky|Dachshund|Chihuahua|"
           "Shih Tzu|Border Collie|Great Dane|Maine Coon|Siamese|Persian|Ragdoll|Bengal|Sphynx|Pomeranian").split("|")
_DISHES = ("Pad Thai|Tiramisu|Pho|Paella|Biryani|Ramen|Sushi|Kimchi|Bibimbap|Lasagna|Risotto|Goulash|Borscht|"
           "Pierogi|Shawarma|Falafel|Hummus|Baklava|Croissant|Pavlova|Poutine|Gumbo|Jambalaya|Ceviche|"
           "Carbonara|Margherita|Caesar Salad|Eggs Benedict|Beef Wellington|Peking Duck|Kung Pao Chicken").split("|")
_AWARDS = ("Nobel Prize|Pulitzer Prize|Oscar|Grammy|Emmy|Tony|Booker Prize|Golden Globe|Purple Heart|"
           "Medal of Honor|Fields Medal|Turing Award|Ballon d'Or|MVP").split("|")

# --- Chinese word lists (composed here) -----------------------------------------------------------

_ZH_SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤")
_ZH_GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏辉建国志文海波宁欣怡晨阳雪梅丹婷浩宇子轩思涵梓萱一诺晓东俊峰嘉琪雅慧佳颖")
_ZH_SYLLABLES = ("安 娜 玛 丽 亚 克 里 斯 托 弗 约 翰 威 廉 詹 姆 士 乔 治 大 卫 彼 得 保 罗 迈 尔 杰 西 卡 莎 拉 "
                 "艾 米 汉 森 伯 特 格 兰 德 维 奇 诺 夫 斯 基 奥 巴 马 林 顿 哈 罗 琳 凯 瑟 布 朗 索 菲 尼 古 拉 "
                 "海 梅 雷 耶 佩 内 塔 罗 杰 斯 芬 吉").split()
_ZH_COUNTRIES = ("中国 日本 韩国 美国 英国 法国 德国 意大利 西班牙 葡萄牙 荷兰 比利时 瑞士 瑞典 挪威 丹麦 芬兰 冰岛 "
                 "爱尔兰 波兰 俄罗斯 乌克兰 希腊 土耳其 埃及 印度 泰国 越南 新加坡 马来西亚 印尼 菲律宾 澳大利亚 澳洲 "
                 "新西兰 加拿大 墨西哥 巴西 阿根廷 智利 秘鲁 南非 肯尼亚 以色列 伊朗 伊拉克 沙特 欧洲 亚洲 非洲 "
                 "北美 南美 台湾 香港 澳门 大陆 中国大陆 内蒙古 新疆 西藏 东北 江南 华北 义大利 诺曼底").split()
_ZH_PLACE_TAILS = "市 省 区 县 镇 村 州 岛 山 湖 河 江 湾 半岛 公园 广场 路 街".split()
_ZH_ORG_TAILS = ("大学 学院 中学 小学 医院 研究所 研究院 协会 委员会 俱乐部 队 足球队 篮球队 电视台 出版社 报社 "
                 "银行 集团 公司 政府 法院 博物馆 图书馆 基金会 工作室 乐队 联盟 部 局").split()
_ZH_WORK_A = ("流浪 时间 星空 故乡 远方 青春 夏天 冬天 月光 城南 边城 围城 长安 江湖 风雪 山河 人间 平凡 少年 "
              "黑夜 白夜 红色 梦里 孤独 沉默 秘密 遗忘 春天 秋天 海上 天空 岁月 繁花 云端 追风").split()
_ZH_WORK_B = ("地球 的礼物 之歌 往事 旧事 传奇 的世界 之城 日记 简史 之旅 故事 花园 来信 之恋 的孩子 物语 "
              "之夜 之王 骑士 大陆 列车 的声音 飞鸟 情书 漫游 归来 狂想曲 协奏曲").split()
_ZH_EVENTS = ("春节 中秋节 端午节 元宵节 清明节 国庆节 圣诞节 感恩节 情人节 万圣节 奥运会 世界杯 亚运会 "
              "冬奥会 双十一 春运 高考 文艺复兴 工业革命 冷战 辛亥革命 五四运动 改革开放 广交会 进博会").split()
_ZH_EVENT_TAILS = "马拉松 博览会 电影节 音乐节 运动会 艺术节 峰会 论坛 大会 锦标赛 公开赛 战役".split()
_ZH_PRODUCTS = ("苹果手机 iPhone 微信 支付宝 淘宝 抖音 快手 微博 小红书 王者荣耀 华为Mate 小米手环 特斯拉Model 3 "
                "ChatGPT Kindle PlayStation 任天堂Switch 钉钉 美团 饿了么 大众点评 高德地图 百度地图").split()
_ZH_DEMONYMS = ("诺曼人 维京人 罗马人 汉族 蒙古族 藏族 满族 回族 壮族 苗族 法国人 德国人 英国人 日本人 韩国人 "
                "美国人 俄罗斯人 意大利人 西班牙人 荷兰人 阿拉伯人 犹太人 普通话 粤语 英语 法语 德语 日语 "
                "佛教 道教 基督教 伊斯兰教 天主教 儒家 印象派 巴洛克").split()
_ZH_BREEDS = "金毛 柯基 泰迪 哈士奇 拉布拉多 柴犬 边牧 萨摩耶 比熊 布偶猫 英短 橘猫 暹罗猫 加菲猫".split()
_ZH_DISHES = "宫保鸡丁 麻婆豆腐 北京烤鸭 小笼包 红烧肉 回锅肉 酸菜鱼 东坡肉 糖醋排骨 兰州拉面 螺蛳粉 肉夹馍 煎饼果子 臭豆腐".split()


class Fillers:
    """Slot fillers of each sub-kind, in English and Chinese."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lex = Lexicon(rng)
        names = self.lex.names
        self.given = names
        self.places = self.lex.places
        self.zh_places = self.lex.zh_places

    def pick(self, seq):
        return self.rng.choice(seq)

    def _place_word(self) -> str:
        return self.pick(self.places) if self.rng.random() < 0.7 else self.pick(_COUNTRYISH)

    def _name(self) -> str:
        return self.pick(self.given)

    def _title_words(self) -> str:
        pattern = self.pick(_WORK_PATTERNS)
        return (pattern.replace("{A}", self.pick(_ADJ), 1).replace("{A}", self.pick(_ADJ))
                .replace("{N}", self.pick(_NOUNS), 1).replace("{N}", self.pick(_NOUNS), 1).replace("{N}", self.pick(_NOUNS))
                .replace("{V}", self.pick(_VERBS_ING)).replace("{P}", self._place_word()).replace("{Name}", self._name()))

    def en(self, kind: str) -> str:
        r = self.rng.random()
        if kind == "person":
            if r < 0.35:
                return self._name()
            if r < 0.75:
                return f"{self._name()} {self.pick(_SURNAMES)}"
            if r < 0.85:
                return f"{self.pick(_TITLES)} {self.pick(_SURNAMES + self.given)}"
            if r < 0.93:
                return self.pick(_HISTORIC)
            return self.pick(_SURNAMES)
        if kind == "place":
            if r < 0.55:
                return self.pick(self.places)
            if r < 0.7:
                return self.pick(_COUNTRYISH)
            if r < 0.85:
                return f"{self._place_word()} {self.pick(_PLACE_TAILS)}"
            if r < 0.95:
                return f"{self.pick(_PLACE_HEADS)} {self.pick(self.places + _SURNAMES)}"
            return f"{self.pick(_SURNAMES)} {self.pick(_PLACE_TAILS)}"
        if kind in ("org", "company", "school"):
            if r < 0.35:
                return self.lex.company()
            if r < 0.65:
                return self.pick(_ORG_PATTERNS).replace("{P}", self._place_word()).replace("{N}", self.pick(_ORG_N))
            if r < 0.8:
                return f"{self.pick(_SURNAMES + self.lex.names)} {self.pick(_CO_WORDS)}"
            if r < 0.9:
                return self.pick(_ACRONYMS)
            return self.pick(_BRANDS)
        if kind == "team":
            return f"{self._place_word()} {self.pick(_TEAM_ANIMALS)}" if r < 0.8 else f"{self._place_word()} {self.pick(['FC', 'United', 'City'])}"
        if kind == "brand":
            return self.pick(_BRANDS)
        if kind in ("work", "book", "film", "song", "painting", "show"):
            return self._title_words()
        if kind == "namework":  # a title that is a name: "Jane Eyre", "Harry Potter"
            return f"{self._name()} {self.pick(_SURNAMES)}" if r < 0.7 else self._name()
        if kind == "game":
            return self._title_words() + (self.pick(_GAME_SUFFIX) if r < 0.4 else "")
        if kind in ("other", "event"):
            if kind == "other":
                return self.en(self.pick(["event", "product", "demonym", "pet", "breed", "dish", "event"]))
            if r < 0.5:
                return self.pick(_EVENTS)
            if r < 0.85:
                return self.pick(_EVENT_PATTERNS).replace("{P}", self._place_word()).replace("{N}", self.pick(_NOUNS))
            return self.pick(_AWARDS)
        if kind == "product":
            if r < 0.55:
                return self.pick(_PRODUCTS)
            return (self.pick(_PRODUCT_PATTERNS).replace("{B}", self.pick(_BRANDS)).replace("{X}", self.pick(_PRODUCT_X))
                    .replace("{D}", str(self.rng.randint(2, 20))))
        if kind == "demonym":
            return self.pick(_DEMONYMS) if r < 0.8 else self.pick(_RELIGIONS)
        if kind == "pet":
            from bench.statement_data import _PET_NAMES
            return self.pick(_PET_NAMES) if r < 0.6 else self._name()
        if kind == "breed":
            return self.pick(_BREEDS)
        if kind == "dish":
            return self.pick(_DISHES)
        raise KeyError(kind)

    def _zh_person(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return self.pick(_ZH_SURNAMES) + "".join(self.pick(_ZH_GIVEN) for _ in range(self.rng.randint(1, 2)))
        parts = ["".join(self.pick(_ZH_SYLLABLES) for _ in range(self.rng.randint(2, 3))) for _ in range(self.rng.randint(1, 2))]
        return "·".join(parts)

    def _zh_place(self) -> str:
        return self.pick(self.zh_places)

    def zh(self, kind: str) -> str:
        r = self.rng.random()
        if kind == "person":
            return self._zh_person()
        if kind == "place":
            if r < 0.25:
                return self.pick(_ZH_COUNTRIES)
            if r < 0.65:
                return self._zh_place()
            base = self._zh_place()
            return base + self.pick(_ZH_PLACE_TAILS) if not base.endswith(("市", "省", "区", "县")) else base
        if kind in ("org", "company", "school", "brand"):
            if r < 0.45:
                return self.lex.zh_company()
            if r < 0.85:
                return self._zh_place() + self.pick(_ZH_ORG_TAILS)
            if r < 0.93:
                return self._zh_place() + "人民政府"
            return self.pick(_ACRONYMS)
        if kind == "team":
            return self._zh_place() + self.pick(["队", "足球队", "篮球队", "俱乐部", "国家队"])
        if kind in ("work", "book", "film", "song", "game", "painting", "show"):
            if r < 0.8:
                return self.pick(_ZH_WORK_A) + self.pick(_ZH_WORK_B)
            return self.pick(_ZH_WORK_A) + self.pick(_ZH_WORK_A)
        if kind in ("other", "event"):
            if kind == "other":
                return self.zh(self.pick(["event", "product", "demonym", "pet", "breed", "dish"]))
            return self.pick(_ZH_EVENTS) if r < 0.6 else self._zh_place() + self.pick(_ZH_EVENT_TAILS)
        if kind == "product":
            return self.pick(_ZH_PRODUCTS)
        if kind == "demonym":
            return self.pick(_ZH_DEMONYMS)
        if kind == "pet":
            from bench.statement_data import _ZH_PET_NAMES
            return self.pick(_ZH_PET_NAMES)
        if kind == "breed":
            return self.pick(_ZH_BREEDS)
        if kind == "dish":
            return self.pick(_ZH_DISHES)
        raise KeyError(kind)


# --- templates --------------------------------------------------------------------------------
# One line a template. Chat turns, documents and encyclopaedia prose; slots as above.

EN = r"""
I finally met {person} at the party last night.
{person} said the meeting was moved to Friday.
Have you talked to {person} lately?
My friend {person} just got back from {place}.
My sister {person} lives in {place} now.
I had lunch with {person} and {person} yesterday.
{person} and I went hiking near {place} last weekend.
Thanks, {person}! That really helps.
Hey {person}, how was your trip to {place}?
I asked {person} about it but she didn't know.
According to {person}, the deal is almost done.
Call {person} when you get a chance.
My manager {person} approved the budget.
{person} was born in {place} in 1842.
{person} was born in {place} and studied at {school}.
In 1066, {person} crossed the channel and defeated the army at {place}.
{person} married {person} in 1520.
The son of {person}, he inherited the throne of {place}.
{person} wrote to {person} about the war.
{person}, the founder of {org}, stepped down in 2019.
{person} is the CEO of {company}.
The novel was written by {person}.
{book} was written by {person} and published in 1925.
The painting was commissioned by {person}.
{person} led the expedition to {place}.
He served under {person} during the campaign.
The theory was first proposed by {person}.
As {person} later recalled, the city was in ruins.
The band was founded by {person} and {person}.
{person} scored twice for {team}.
We flew to {place} for the wedding.
I'm moving to {place} next month.
I grew up in {place}, a small town near {place}.
Have you ever been to {place}?
We spent a week in {place} and two days in {place}.
The weather in {place} was amazing.
It takes four hours to drive from {place} to {place}.
{place} is beautiful in the spring.
My parents still live in {place}.
The trip to {place} was the highlight of my year.
I visited {place} for the first time.
The office is on {place}, next to the station.
{place} is the capital of {place}.
{place} lies on the coast of {place}.
The river flows through {place} before reaching {place}.
The region of {place} was conquered in the 10th century.
{place} has a population of about two million.
The city of {place} is known for its cathedral.
He settled in {place}, where he died in 1702.
The Vikings raided {place} and {place} for decades.
The {demonym} settlers arrived in {place} in the 9th century.
{place} declared independence in 1991.
The treaty gave {place} to {place}.
The battle took place near {place}.
I work at {company} as a designer.
I just got a job at {company}!
She works for {org} in {place}.
He joined {org} in 2015.
{company} announced record profits this quarter.
{company} was founded in 1998 in {place}.
{company} acquired {company} for $2 billion.
Shares of {company} fell 4% on Monday.
The study was funded by {org}.
The report was published by {org}.
She graduated from {school} in 2010.
He teaches at {school}.
{org} issued a statement on Tuesday.
The agreement between {org} and {org} was signed in {place}.
{org} has offices in {place} and {place}.
I'm applying to {school} and {school}.
He was a member of {org} for ten years.
The program is run by {org}.
Contact {org} for more information.
We partnered with {company} on the launch.
I'm in talks with {brand} about a sponsorship.
I got a deal with {brand}!
I love my new {brand} shoes.
I bought it at {brand} last week.
The {brand} store was packed.
{brand} sent me a bunch of free gear.
I signed with {team} for the season.
{team} won the championship in 2018.
Did you watch the {team} game last night?
He plays for {team}.
{team} beat {team} 3-1.
I've been a {team} fan my whole life.
I just finished reading {book}.
Have you read {book}? It's amazing.
My favorite book is {book}.
I'm reading {book} by {person} right now.
We watched {film} last night.
{film} is my all-time favorite movie.
Have you seen {film}?
The movie {film} came out in 2003.
{film} won the award for best picture.
I've been listening to {song} on repeat.
Their song {song} was a huge hit.
The album {work} sold a million copies.
I've been playing {game} all weekend.
The game {game} is so addictive.
Have you tried {game}? My team plays it every night.
I started a new playthrough of {game}.
{painting} hangs in the museum in {place}.
He painted {painting} in 1889.
I binge-watched {show} over the weekend.
The show {show} got renewed for another season.
{book} is a novel by {person}.
{film} is a 1994 film directed by {person}.
{song} is a song by the band {org}.
{work} was released in 2011 to critical acclaim.
The sequel to {work} is coming out next year.
The story of {work} takes place in {place}.
I wrote a short story called {work}.
My dog {pet} loves the beach.
I adopted a kitten and named her {pet}.
{pet} knocked over my coffee again.
We took {pet} to the vet today.
Our {breed} {pet} is three years old.
We're thinking of getting a {breed}.
I'm so excited for {event}!
What are you doing for {event}?
We spent {event} with my family.
I ran the {event} last year.
The {event} was amazing this year.
She won the {event} in 2016.
After {event}, everything changed.
During the {event}, many cities were destroyed.
I just got the new {product}.
My {product} stopped working.
I use {product} every day.
Do you think {product} is worth it?
I made {dish} for dinner.
Have you tried the {dish} there? It's incredible.
He speaks {demonym} and a little {demonym}.
The {demonym} army invaded in 911.
Most of the people there are {demonym}.
The church converted to {demonym} rites.
{any} was mentioned a lot in the meeting.
I keep hearing about {any}.
What do you think of {any}?
{any} came up again today.
I've been thinking about {any} a lot.
Honestly, {any} is overrated.
We talked about {any} for hours.
The article was mostly about {any}.
Did you hear the news about {any}?
I can't stop thinking about {any}.
I love {any}!
{any} is one of my favorite things.
Here's a picture of {any}.
Name: {person}
Owner: {person}
Company: {company}
Location: {place}
Title: {work}
From: {person}
To: {person}, {person}
Attendees: {person}, {person} and {person}
{company} | {place} | {person}
The meeting with {company} in {place} is confirmed for Tuesday.
Please send the contract to {person} at {company}.
{person} ({company}) will present the results.
Dear {person}, thank you for your letter.
Regards, {person}
The board of {company} met in {place}.
{company}, a company based in {place}, makes batteries.
The headquarters of {org} are in {place}.
{person} and {person} founded {company} in {place}.
{person} moved to {place} to work at {company}.
{person} read {book} on the train to {place}.
{person} took {pet} to {place} for {event}.
Flights from {place} to {place} are cheap in {event} week.
{person} plays {game} with friends from {school}.
{same} and {same} are both on the list.
We compared {same} and {same} last week.
I like {same} more than {same}.
{same}, {same} and {same} were all mentioned.
Both {same} and {same} came up again.
Neither {same} nor {same} was there.
It's between {same} and {same} now.
{same} or {same}? I can't decide.
My top three: {same}, {same}, {same}.
First {same} and then {same}.
Have you heard of {same} or {same}?
He mentioned {same} and {same}, and then {same}.
I'm a huge {work} fan.
I'm a huge {namework} fan.
I've read all the {namework} books.
They made all the props for the {namework} films.
Been discussing a {namework} fan project.
The {namework} movies are my comfort watch.
I met a {namework} fan at the convention.
We did a {namework} marathon this weekend.
The {namework} series is on sale.
{namework} is the best novel I've read this year.
Have you read {namework}? The book is a classic.
Status | Owner | Region
{any} | {person} | Approved
{place} | {person} | Pending
Budget review with {company} finance | Done | {person}
Vendor: {company} | Contact: {person} | City: {place}
{product} | ordered from {company} | {person}
{place} office | {person} | {company}
I've read all the {book} books.
We watched the {film} movies back to back.
Have you seen the new {show} season?
The {game} tournament starts tomorrow.
I love the {work} soundtrack.
The {book} series got me into reading.
I'm rereading {book} for the third time.
I still think {film} is better than {film}.
We quoted {book} all night.
The game was called {game}, and we played it for hours.
I used to play {game} and {game} with my brother.
I quit {company} last week.
I left {company} after five years.
I'm leaving {company} for {company}.
I just had an interview with {company}.
{company} laid off half the team.
I got an offer from {company}!
She's the new director at {org}.
We're meeting the {company} people tomorrow.
{company} and {company} are competitors.
We flew from {place} to {place} and then to {place}.
{place} and {place} are now part of {place}.
I've lived in {place}, {place} and {place}.
He wrote {book} and {book}.
The estates of {person} in {place} were sold.
{person} by {person} is on my reading list.
Empress {person} received the ambassador.
Prince {person} arrived late.
I'm reading a biography of {person}.
{person}'s memoir came out last year.
I've always admired {person}.
"""

ZH = r"""
我昨天和{person}一起吃饭了。
{person}说会议改到周五了。
你最近和{person}联系了吗？
我的朋友{person}刚从{place}回来。
我姐姐{person}现在住在{place}。
{person}和{person}是大学同学。
谢谢你，{person}！
{person}出生于{place}，毕业于{school}。
{person}是{company}的创始人。
{person}于1920年去世。
这部小说的作者是{person}。
{person}担任{org}主席。
{person}率领军队进攻{place}。
{person}被任命为{org}的负责人。
{person}在比赛中击败了{person}。
{person}导演的电影{film}获得了好评。
根据{person}的说法，事情已经解决了。
我下个月要去{place}。
我们在{place}玩了一周。
{place}的天气很好。
我从小在{place}长大。
你去过{place}吗？
他们搬到{place}了。
{place}是{place}的首都。
{place}位于{place}东部。
{place}人口约两百万。
这条河流经{place}和{place}。
从{place}到{place}开车要四个小时。
{place}以美食闻名。
会议将在{place}举行。
他在{place}度过了晚年。
我在{company}工作。
她刚加入{company}。
{company}宣布了新的计划。
{company}成立于1998年，总部位于{place}。
{company}收购了{company}。
他毕业于{school}。
她在{school}教书。
{org}发布了声明。
这个项目由{org}负责。
{org}和{org}签署了合作协议。
{team}赢得了冠军。
他效力于{team}。
{team}以3比1战胜了{team}。
昨晚你看{team}的比赛了吗？
我最近在读《{book}》。
你看过《{film}》吗？
我最喜欢的电影是{film}。
这首歌叫《{song}》。
我最近在玩{game}，特别好玩。
我刚看完{book}，很感人。
这部电视剧{show}太好看了。
{film}是一部2010年上映的电影。
《{work}》讲述了一个发生在{place}的故事。
他写了一本书叫{book}。
我家的狗{pet}特别喜欢散步。
我们给小猫取名叫{pet}。
我想养一只{breed}。
{event}你打算怎么过？
今年{event}我回{place}过年。
他参加了{event}。
{event}期间很多人出去旅游。
我刚买了{product}。
我每天都用{product}。
晚饭我做了{dish}。
这里的{dish}特别正宗。
{demonym}在这里生活了几百年。
他会说{demonym}。
大家都在讨论{any}。
你觉得{any}怎么样？
我最近一直在想{any}的事情。
今天又有人提到{any}了。
我特别喜欢{any}。
{person}在{place}的{company}上班。
{person}带着{pet}去{place}过{event}。
{person}在{school}读书时看了{book}。
{company}在{place}开了新店。
{org}位于{place}。
我最近在读{person}的传记。
{person}的自传很好看。
这本书写的是{person}的一生。
我很崇拜{person}。
{same}和{same}都很有名。
我比较喜欢{same}，不太喜欢{same}。
{same}、{same}和{same}都提到了。
先去{same}，再去{same}。
{same}还是{same}？我选不出来。
他去过{place}、{place}和{place}。
我们这周去了{place}和{place}。
{company}和{company}是竞争对手。
我辞职离开了{company}。
他是{book}的忠实粉丝。
{game}这款游戏在{place}很流行。
{company}在{place}推出了{game}。
{person}和{person}一起创办了{company}。
这本书讲的是{person}在{place}的故事。
{place}的{org}举办了{event}。
{person}是{place}人，后来去了{place}。
"""

_SLOT = re.compile(r"\{(\w+)\}")
_NOISE_EN = ("the a to and of in for with on at it is was we my i you that this so but just really not have had "
             "got went saw said think know like about after before then when what there here today yesterday "
             "week year time people thing way new old good great big little last first next also more very "
             "again still even back out up over from by as be been are were do did can will would could "
             "should one two three some many much all every most other such only own same than too").split()
_NOISE_ZH = list("我你他她们的了是在有和就不也都很这那个上下去来说到要会好看还没把被给让跟从对为着过吗呢吧啊")


def templates(block: str) -> list[str]:
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


EN_TEMPLATES = templates(EN)
ZH_TEMPLATES = templates(ZH)
_ANY = ("person", "place", "org", "work", "other")


def noise_template(rng: random.Random, zh: bool) -> str:
    """A slot among random common words: a context that tells nothing, so the mention has to."""
    words = _NOISE_ZH if zh else _NOISE_EN
    left = [rng.choice(words) for _ in range(rng.randint(0, 6))]
    right = [rng.choice(words) for _ in range(rng.randint(0, 6))]
    joiner = "" if zh else " "
    text = joiner.join(left + ["{any}"] + right)
    return (text[:1].upper() + text[1:] if not zh else text) + ("。" if zh else rng.choice([".", "", "!", "?"]))


def example(rng: random.Random, fill: Fillers, zh: bool, template: str) -> dict:
    """A sentence and its slots: (start, end, type)."""
    spans, text = [], ""
    last = 0
    same = rng.choice(_ANY + ("book", "film", "game", "team", "company", "event", "place", "person"))
    for m in _SLOT.finditer(template):
        text += template[last:m.start()]
        kind = m.group(1)
        if kind == "any":
            kind = rng.choice(_ANY)
        elif kind == "same":  # a list: its names are of one type ("Genoa and Lucca", "成都和重庆")
            kind = same
        value = fill.zh(kind) if zh else fill.en(kind)
        if not zh and rng.random() < 0.08 and kind in ("work", "book", "film", "song", "game"):
            value = f'"{value}"'  # a title in quotes, as chats write them
        spans.append((len(text), len(text) + len(value), KIND[kind]))
        text += value
        last = m.end()
    text += template[last:]
    return {"text": text, "spans": spans, "lang": "zh" if zh else "en", "template": template}
