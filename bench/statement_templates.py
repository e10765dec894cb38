"""The statement model's training templates (filled and labelled by bench/statement_data.py), English and
Chinese. Each is written for this purpose; none comes from LoCoMo, LongMemEval or the fresh sets of bench/."""

# Fillers: {co} employer, {org} employer or a kind of employer, {job} title, {job2} another title, {city},
# {city2}, {name} a person, {kin}, {friend}, {pk} pet kind, {pn} pet name, {like}, {like2}, {act} an
# activity, {goal}, {when}, {past}. One line a template: "text | class [!ends]".

EN = r"""
{S} work{s} at [employer:{co}]. | biographical
{S} work{s} at [employer:{co}] as [title:a {job}]. | biographical
{S} work{s} at [employer:{co}] as [title:a {job}] in [location:{city}]. | biographical
{S} work{s} at [employer:{co}] in [location:{city}]. | biographical
{S} {be} [title:a {job}] at [employer:{co}] in [location:{city}]. | biographical
{S} {have} been [title:a {job}] for years. | biographical
{S} work{s} in sales at [employer:{co}]. | biographical
{S} {be} [title:a {job}] for [employer:{co}], mostly remote. | biographical
{S} work{s} as [title:a {job}] at [employer:{org}]. | biographical
{S} work{s} as [title:a {job}]. | biographical
{S} {be} [title:a {job}] at [employer:{co}]. | biographical
{S} {be} [title:a {job}]. | biographical
{S} {be} [title:a {job}] and {S2} love{s} it. | biographical
{S} {be} employed by [employer:{co}]. | biographical
{S} {have} been working for [employer:{co}] for three years. | biographical
{My} job is at [employer:{co}]. | biographical
{My} employer is [employer:{co}]. | biographical
{S} do{es} payroll for [employer:{co}]. | biographical
{S} now work{s} at [employer:{co}]. | state_change
{S} just started at [employer:{co}] as [title:a {job}]. | state_change
{S} started a new job at [employer:{co}] {past}. | state_change
Big news: {S} got a job at [employer:{co}]! | state_change
{S} accepted an offer from [employer:{co}]. | state_change
{S} joined [employer:{co}] {past}. | state_change
{S} {be} now at [employer:{co}]. | state_change
{S} switched to [employer:{co}] {past}. | state_change
{S} moved over to [employer:{co}] as [title:their new {job}]. | state_change
{S} quit [employer_x:{co}] {past}. | state_change
{S} quit [employer_x:{co}] and joined [employer:{co2}]. | state_change
{S} left [employer_x:{co}] to work at [employer:{co2}]. | state_change
{S} left [employer_x:{co}] {past}. | state_change
{S} resigned from [employer_x:{co}]. | state_change
{S} no longer work{s} at [employer_x:{co}]. | state_change
{S} {be} not working at [employer_x:{co}] anymore. | state_change
{S} got laid off from [employer_x:{co}]. | state_change
[employer_x:{co}] let {me} go {past}. | state_change
{S} quit {my} job {past}. | state_change !employer
{S} quit {my} job. | state_change !employer
Big news: {S} quit {my} job! | state_change !employer
{S} left {my} job {past}. | state_change !employer
{S} resigned {past}. | state_change !employer
{S} got fired {past}. | state_change !employer
{S} {be} unemployed now. | state_change !employer
{S} {be} looking for a new job since {S2} got laid off. | state_change !employer
{S} moved out {past}. | state_change !location
{S} sold {my} house and moved away. | state_change !location
{S} {be} single again. | state_change !partner
{S} now work{s} at [employer:{co}] as [title:a {job}]. | state_change
{S} {be} now working at [employer:{co}] as [title:a {job}]. | state_change
{S} work{s} for [employer:{co}] now. | state_change
{S} changed jobs and {be} at [employer:{co}] now. | state_change
{S} quit [employer_x:{co}] {past} and moved to [location:{city}]. | state_change
{S} moved to [location:{city}] for {my} new job at [employer:{co}]. | state_change
{S} quit {my} job at [employer_x:{co}]. | state_change
{S} {be} between jobs right now. | state_change !employer
{S} retired {past}. | state_change !employer
{S} lost {my} job {past}. | state_change !employer
{S} handed in {my} notice. | state_change !employer
{S} got promoted to [title:{job}]. | state_change
{S} {be} now [title:a {job}]. | state_change
{S} became [title:a {job}] {past}. | state_change
{S} changed careers and {be} now [title:a {job}]. | state_change
{S} {be} no longer [title_x:a {job}]; {S2} work{s} as [title:a {job2}] now. | state_change
{S} gave up being [title_x:a {job}]. | state_change
{S} live{s} in [location:{city}]. | biographical
{S} {be} based in [location:{city}]. | biographical
{S} rent{s} an apartment in [location:{city}]. | biographical
{My} home is in [location:{city}]. | biographical
{S} moved to [location:{city}] {past}. | state_change
{S} just moved to [location:{city}]. | state_change
{S} relocated to [location:{city}] for work. | state_change
{S} {be} living in [location:{city}] now. | state_change
{S} moved from [location_x:{city}] to [location:{city2}]. | state_change
{S} no longer live{s} in [location_x:{city}]. | state_change
{S} moved out of [location_x:{city}]. | state_change
{S} finally settled in [location:{city}]. | state_change
{S} grew up in [origin:{city}]. | biographical
{S} {be} originally from [origin:{city}]. | biographical
{S} was born in [origin:{city}]. | biographical
{S} {be} from [origin:{city}]. | biographical
{S} {be} married to [partner:{name}]. | biographical
{S} {be} dating [partner:{name}]. | biographical
{S} got engaged to [partner:{name}]. | state_change
{S} and [partner_x:{name}] broke up. | state_change
{S} broke up with [partner_x:{name}] {past}. | state_change
{S} and [partner_x:{name}] got divorced. | state_change
{S} {have} [family:a {kin}] named {name}. | biographical
{My} [family:{kin}] {name} is visiting. | biographical
{S} called {my} [family:{kin}] {past}. | other
{S} {have} [family:two kids]. | biographical
{S} {have} [pet:a {pk} named {pn}]. | biographical
{S} {have} [pet:a {pk}] named [pet:{pn}]. | biographical
{S} {have} [pet:a {pk}] called {pn}. | biographical
{S} {have} [pet:a {pk}]. | biographical
{S} {have} [pet:two {pk}s]. | biographical
{My} [pet:{pk}] is named {pn}. | biographical
{S} walk{s} {my} [pet:{pk} {pn}] every day. | habit
{S} {be} working on a new project. | other
{S} {be} working on {my} thesis. | other
{S} {be} busy at work this week. | other
{S} worked late {past}. | other
{S} {have} a big deadline at work. | other
{S} {be} working on a painting of {city}. | other
{S} took the day off. | other
{S} {be} tired after work. | other
{S} adopted [pet:a {pk}] {past}. | state_change
{My} [pet:{pk} {pn}] loves the park. | biographical
{S} got [pet:a new {pk}] and named it {pn}. | state_change
{S} love{s} [like:{like}]. | preference
{S} love{s} [like:{like}] with friends. | preference
{S} like{s} [like:{like}] a lot. | preference
{S} enjoy{s} [like:{like}] on weekends. | preference
{S} prefer{s} [like:{like}] to {like2}. | preference
{S} would rather have [like:{like}]. | preference
{S} prefer{s} [like:{like}] with [like:{like2}]. | preference
{S} {be} passionate about [like:{like}]. | preference
{S} {be} obsessed with [like:{like}]. | preference
{My} favorite food is [like:{like}]. | preference
{S} {have} always loved [like:{like}]. | preference
{S} really enjoy{s} [like:{like}]. | preference
{S} prefer{s} [like:{like}] over {like2}. | preference
{S} prefer{s} [like:{like}]. | preference
{S} {be} a big fan of [like:{like}]. | preference
{S} {be} really into [like:{like}] lately. | preference
{My} favorite thing is [like:{like}]. | preference
{S} can't get enough of [like:{like}]. | preference
{S} hate{s} [dislike:{like}]. | preference
{S} {be} not a fan of [dislike:{like}]. | preference
{S} can't stand [dislike:{like}]. | preference
{S} don't like [dislike:{like}]. | preference
{S} no longer like{s} [dislike:{like}]. | state_change
{S} {be} planning a trip to [plan:{city}] {when}. | plan
{S} {be} going to [plan:{city}] {when}. | plan
{S} booked flights to [plan:{city}] for {when}. | plan
{S} want{s} to [plan:{goal}] someday. | plan
{S} hope{s} to [plan:{goal}] {when}. | plan
{S} {be} saving up to [plan:{goal}]. | plan
{S} would love to move to [plan:{city}] one day. | plan
{S} might quit [employer:{co}] someday. | plan
{S} {be} thinking about leaving [employer:{co}]. | plan
{S} {be} interviewing at [plan:{co}] next week. | plan
{S} visited [plan:{city}] {past}. | other
{S} went to [plan:{city}] for a conference. | other
{S} {have} a work trip to [plan:{city}] {when}. | plan
{S} {act} every morning. | habit
Every evening {S} {act}. | habit
{S} usually {act} on weekends. | habit
{S} always {act} before work. | habit
{My} [family:{kin}] works at {co}. | biographical
{My} [family:{kin}] just moved to {city}. | other
{My} [family:{kin}] quit {co} {past}. | other
{My} {friend} works at {co}. | other
{My} {friend} moved to {city} {past}. | other
{My} {friend} left {co} {past}. | other
{name} works at {co} as a {job}. | other
{name} moved to {city}. | other
{co} opened a new office in {city}. | other
{co} is hiring {job}s. | other
{S} had lunch with someone from {co}. | other
{S} read an article about {co}. | other
{S} met a {job} from {city} at the party. | other
{My} {friend} is a {job}. | other
{S} used to work at [employer_x:{co}]. | biographical
{S} used to live in [location_x:{city}]. | biographical
Did {co} ever reply to you? | other
Where do you live now? | other
Do you like {like}? | other
Have you ever been to {city}? | other
{chat} | other
{chat} | other
{chat} | other
{S} teach{es} [title:{job}] classes at [employer:{co}]. | biographical
{S} work{s} remotely for [employer:{co}]. | biographical
{S} work{s} night shifts at [employer:{co}]. | biographical
{S} work{s} part-time at [employer:{co}]. | biographical
{S} {be} [title:a student] at [employer:{co}]. | biographical
{S} got hired as [title:a {job}] at [employer:{co}]. | state_change
Today was {my} first day as [title:{job}] at [employer:{co}]. | state_change
{S} start{s} as [title:a {job}] at [employer:{co}] {when}. | state_change
[partner_x:{name}] and {S} broke up {past}. | state_change
[partner_x:{name}] and {S} called off the engagement. | state_change
{S} stopped working at [employer_x:{co}]. | state_change
{S} switched employers {past}. | state_change !employer
{S} switched employers and {be} with [employer:{co}] now. | state_change
These days {S} call{s} [location:{city}] home. | state_change
{S} settled into {my} new apartment in [location:{city}]. | state_change
{S} packed up and moved to [location:{city}]. | state_change
{S} moved back to [location:{city}] {past}. | state_change
{S} moved out of {my} parents' place. | state_change !location
"""

ZH = r"""
{S}在[employer:{zco}]工作。 | biographical
{S}在[employer:{zco}]上班，是[title:{zjob}]。 | biographical
{S}在[employer:{zco}]当[title:{zjob}]。 | biographical
{S}是[employer:{zco}]的[title:{zjob}]。 | biographical
{S}是一名[title:{zjob}]。 | biographical
{S}的工作是[title:{zjob}]。 | biographical
{S}在[employer:{zco}]做[title:{zjob}]，已经三年了。 | biographical
{S}现在在[employer:{zco}]工作。 | state_change
{S}现在在[employer:{zco}]。 | state_change
{S}换工作了，去了[employer:{zco}]。 | state_change
{S}下周一开始去[employer:{zco}]上班。 | state_change
{S}被调到了[employer:{zco}]。 | state_change
{S}换工作了。 | state_change !employer
{S}不在[employer_x:{zco}]干了。 | state_change
{S}在[location:{zcity}]的[employer:{zco}]工作。 | biographical
{S}在[employer:{zco}]工作，住在[location:{zcity}]。 | biographical
{S}跟[partner_x:{zname}]分手了，现在单身。 | state_change
{S}搬家了。 | state_change !location
{S}换工作了，现在在[employer:{zco}]。 | state_change
{S}跳槽到[employer:{zco}]了。 | state_change
{S}{zpast}入职了[employer:{zco}]。 | state_change
{S}加入了[employer:{zco}]。 | state_change
{S}从[employer_x:{zco}]离职了。 | state_change
{S}从[employer_x:{zco}]辞职了，去了[employer:{zco2}]。 | state_change
{S}离开了[employer_x:{zco}]。 | state_change
{S}不在[employer_x:{zco}]工作了。 | state_change
{S}已经不在[employer_x:{zco}]上班了。 | state_change
{S}被[employer_x:{zco}]裁员了。 | state_change
{S}辞职了。 | state_change !employer
{S}{zpast}把工作辞了。 | state_change !employer
{S}退休了。 | state_change !employer
{S}失业了。 | state_change !employer
{S}升职了，现在是[title:{zjob}]。 | state_change
{S}转行当了[title:{zjob}]。 | state_change
{S}现在做[title:{zjob}]。 | state_change
{S}不做[title_x:{zjob}]了，改当[title:{zjob2}]。 | state_change
{S}住在[location:{zcity}]。 | biographical
{S}在[location:{zcity}]生活。 | biographical
{S}家在[location:{zcity}]。 | biographical
{S}搬到[location:{zcity}]了。 | state_change
{S}{zpast}搬去了[location:{zcity}]。 | state_change
{S}现在住在[location:{zcity}]。 | state_change
{S}从[location_x:{zcity}]搬到了[location:{zcity2}]。 | state_change
{S}不住在[location_x:{zcity}]了。 | state_change
{S}从[location_x:{zcity}]搬走了。 | state_change
{S}定居在[location:{zcity}]了。 | state_change
公司在[location:{zcity}]，所以{S}也搬过去了。 | state_change
{S}在[origin:{zcity}]长大。 | biographical
{S}是[origin:{zcity}]人。 | biographical
{S}老家在[origin:{zcity}]。 | biographical
{S}和[partner:{zname}]结婚了。 | state_change
{S}在和[partner:{zname}]谈恋爱。 | biographical
{S}和[partner_x:{zname}]分手了。 | state_change
{S}和[partner_x:{zname}]离婚了。 | state_change
{S}有一个[family:{zkin}]。 | biographical
{S}的[family:{zkin}]叫{zname}。 | biographical
{S}养了[pet:一只{zpk}叫{zpn}]。 | biographical
{S}养了[pet:一只{zpk}]。 | biographical
{S}家里有[pet:一只{zpk}]。 | biographical
{S}最近工作很忙。 | other
{S}今天加班了。 | other
{S}在写论文。 | other
{S}的[pet:{zpk}{zpn}]很可爱。 | biographical
{S}{zpast}领养了[pet:一只{zpk}]。 | state_change
{S}喜欢[like:{zlike}]。 | preference
{S}比较喜欢[like:{zlike}]。 | preference
{S}喜欢喝[like:{zlike}]。 | preference
{S}爱吃[like:{zlike}]。 | preference
{S}平时喜欢[like:{zlike}]。 | preference
{S}希望回答[like:{zlike}]。 | preference
{S}特别喜欢[like:{zlike}]。 | preference
{S}更喜欢[like:{zlike}]，不太喜欢{zlike2}。 | preference
{S}最爱[like:{zlike}]了。 | preference
{S}迷上了[like:{zlike}]。 | preference
{S}不喜欢[dislike:{zlike}]。 | preference
{S}讨厌[dislike:{zlike}]。 | preference
{S}不再喜欢[dislike:{zlike}]了。 | state_change
{S}{zwhen}要去[plan:{zcity}]旅游。 | plan
{S}打算{zwhen}去[plan:{zcity}]。 | plan
{S}计划[plan:{zgoal}]。 | plan
{S}想[plan:{zgoal}]。 | plan
{S}以后想搬到[plan:{zcity}]去。 | plan
{S}可能会从{zco}离职。 | plan
{S}在考虑跳槽。 | plan
{S}{zwhen}去[plan:{zcity}]出差。 | plan
{S}{zpast}去[plan:{zcity}]玩了。 | other
{S}每天早上跑步。 | habit
{S}每周末都去游泳。 | habit
{S}每天晚上看书。 | habit
{S}通常周末做饭。 | habit
{S}的[family:{zkin}]在{zco}工作。 | biographical
{S}的[family:{zkin}]搬到{zcity}了。 | other
{S}的[family:{zkin}]从{zco}离职了。 | other
{S}的{zfriend}在{zco}上班。 | other
{S}的{zfriend}搬到{zcity}了。 | other
{S}的{zfriend}从{zco}辞职了。 | other
{zname}在{zco}工作。 | other
{zco}在{zcity}开了新办公室。 | other
{zco}最近在招人。 | other
{S}以前在[employer_x:{zco}]工作。 | biographical
{S}以前住在[location_x:{zcity}]。 | biographical
你现在住在哪里？ | other
你喜欢{zlike}吗？ | other
{zchat} | other
{zchat} | other
{zchat} | other
{S}在[location:{zcity}]读[title:研究生]。 | biographical
{S}毕业了，现在在[employer:{zco}]工作。 | state_change
{S}毕业了，在[location:{zcity}]找了份工作。 | state_change !employer
{S}在[employer:{zco}]做[title:{zjob}]。 | biographical
[partner_x:{zname}]和{S}分手了。 | state_change
{S}全家搬到了[location:{zcity}]。 | state_change
{S}搬回了[location:{zcity}]。 | state_change
"""
