"""`bot.language: zh` through the real console: every built-in reply a user meets without a
model comes out of the Chinese catalogue (help, reminders, refusals, unknown command, the
no-model notice, summary, welcome)."""

from __future__ import annotations

from pathlib import Path

from tests.bot.console_proc import ConsoleProc, write_config


async def test_every_builtin_reply_in_chinese(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, bot={"admins": ["root"], "language": "zh", "timezone": "Asia/Shanghai"}
    )
    bot = await ConsoleProc.start(config)
    try:
        await bot.send("/help")
        await bot.expect(r"你可以使用这些命令：")  # no model: no "ask me in plain words"
        await bot.expect(r"• /reminder_set — 设置提醒")
        await bot.expect(r"用法：/reminder_set ")
        await bot.send("你好")
        await bot.expect(r"还没有配置模型")
        await bot.send("/nope")
        await bot.expect(r"未知命令 /nope。发送 /help 查看可用的命令。")
        await bot.send("/reminder_set 10分钟后 喝水")
        rid = (
            await bot.expect(r"⏰ 已设置提醒，时间 周. \d{4}-\d\d-\d\d .*：喝水（编号 (\w+)）")
        ).group(1)
        await bot.send("/reminder_set 明天 9:00 开会")
        await bot.expect(r"⏰ 已设置提醒，时间 周. .* 09:00 CST：开会")
        await bot.send("/reminder_set 工作日 9:00 站会")
        await bot.expect(r"每周 mon-fri 09:00（下次 周. ")
        await bot.send("/reminder_set 随便 写写")
        m = await bot.expect(r"提醒未设置：请说明时间.*at='(\d{4}-\d\d-\d\d) 09:00'")
        assert m.group(1) > "2025-01-01"
        await bot.send("/reminder_list")
        await bot.expect(r"你进行中的提醒（3 个）：")
        await bot.expect(r"用 /reminder_delete 编号 删除")
        await bot.send(f"/reminder_delete {rid}")
        await bot.expect(rf"已删除提醒 {rid}：喝水")
        await bot.send("/reminder_delete zzz")
        await bot.expect(r"这里没有编号为 'zzz' 的提醒")
        await bot.send("/summary")
        await bot.expect(r"summary 只能在群聊中使用")
        await bot.send(":group team1")
        await bot.send("/summary 3x")
        await bot.expect(r"未总结：未知单位 'x'")
        await bot.send(":join dave")
        await bot.expect(r"欢迎！发送 /help 看看我能做什么。")
    except Exception:
        print("\n".join(bot.lines))
        raise
    finally:
        await bot.close()
