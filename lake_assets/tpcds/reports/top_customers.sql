-- The 100 billing customers with the highest web net profit, with their orders, units and net paid, and the first and last sale date.
SELECT c_customer_sk,
       c_customer_id,
       c_first_name,
       c_last_name,
       c_email_address,
       count(DISTINCT ws_order_number) AS orders,
       sum(ws_quantity) AS units,
       sum(ws_net_paid) AS net_paid,
       sum(ws_net_profit) AS net_profit,
       min(d_date) AS first_sale,
       max(d_date) AS last_sale
FROM lake.tpcds.web_sales
JOIN lake.tpcds.customer ON ws_bill_customer_sk = c_customer_sk
LEFT JOIN lake.tpcds.date_dim ON ws_sold_date_sk = d_date_sk
GROUP BY c_customer_sk,
         c_customer_id,
         c_first_name,
         c_last_name,
         c_email_address
ORDER BY net_profit DESC NULLS LAST,
         c_customer_sk
LIMIT 100
