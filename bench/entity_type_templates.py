"""The entity typer's training templates (filled and labelled by bench/entity_type_data.py), English and
Chinese: chat turns, documents and encyclopaedia prose, each written for this purpose."""

# One line a template; its slots are filled by the Fillers of bench/entity_type_data.py.

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
