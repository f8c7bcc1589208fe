-- Web sales by hour of the day (time_dim): orders, lines, units, net paid and net profit; lines without a sold time under a NULL hour.
SELECT t_hour,
       t_am_pm,
       count(DISTINCT ws_order_number) AS orders,
       count(*) AS order_lines,
       sum(ws_quantity) AS units,
       sum(ws_net_paid) AS net_paid,
       sum(ws_net_profit) AS net_profit
FROM lake.tpcds.web_sales
LEFT JOIN lake.tpcds.time_dim ON ws_sold_time_sk = t_time_sk
GROUP BY t_hour,
         t_am_pm
ORDER BY t_hour NULLS LAST,
         t_am_pm NULLS LAST
