"""Scheduled exports: cron fire times, relative windows, the schedule service and the
scheduler loop (issue 24, DESIGN.md "Schedules and notifications").

* :mod:`.cron`: fire times of a 5-field cron in an IANA zone (APScheduler's
  ``CronTrigger``), with the daylight-saving rule;
* :mod:`.windows`: relative windows resolved into a type's ``date_range`` parameters;
* :mod:`.definition`: checking a schedule body and building the task of a fire;
* :mod:`.service`: create, list, update, pause, resume, run now, delete;
* :mod:`.scheduler`: the loop that claims due schedules and fires each exactly once.
"""
